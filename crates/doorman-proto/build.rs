//! Generates the Rust types and tonic stubs for `proto/doorman.proto`.
//!
//! protoc comes from the `protoc-bin-vendored` crate, so no system protoc is
//! needed. A `PROTOC` set in the environment (e.g. by `.cargo/config.toml`)
//! is respected only if it points at an existing file.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let usable = std::env::var_os("PROTOC")
        .map(|p| std::path::Path::new(&p).is_file())
        .unwrap_or(false);
    if !usable {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        // SAFETY: build scripts are single-threaded at this point.
        unsafe { std::env::set_var("PROTOC", protoc) };
    }
    let proto_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let proto = proto_dir.join("doorman.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&[proto], &[proto_dir])?;
    Ok(())
}
