//! Generates the Rust types and tonic stubs for `proto/doorman.proto`.
//!
//! protoc comes from the `protoc-bin-vendored` crate, so no system protoc is
//! needed. A `PROTOC` set in the environment (e.g. by `.cargo/config.toml`)
//! is respected only if it points at an existing file.
//!
//! Must not: need a system protoc or network access.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = match std::env::var_os("PROTOC").map(std::path::PathBuf::from) {
        Some(p) if p.is_file() => p,
        _ => protoc_bin_vendored::protoc_bin_path()?,
    };
    let mut config = tonic_prost_build::Config::new();
    config.protoc_executable(protoc);
    let proto_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("proto");
    let proto = proto_dir.join("doorman.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set")?);
    tonic_prost_build::configure()
        // For server reflection (`doorman_proto::FILE_DESCRIPTOR_SET`).
        .file_descriptor_set_path(out.join("doorman_descriptor.bin"))
        .build_client(true)
        .build_server(true)
        // Small per-call buffers: a lease stream keeps its two for as long
        // as it is open (`src/codec.rs`).
        .codec_path("crate::codec::LeanCodec")
        .compile_with_config(config, &[proto], &[proto_dir])?;
    Ok(())
}
