//! `doorman-pki DIR NAME...`: the throwaway CA of `doorman-pki` for
//! scripts (the Python checks): writes `DIR/ca.pem` and, for each NAME,
//! `DIR/NAME.pem` and `DIR/NAME.key`, a certificate named NAME (common
//! name) for 127.0.0.1 and `localhost` that may serve and authenticate as
//! a client. Exits 2 with a usage line on bad arguments, 1 on a failure.
//!
//! Must not: write anywhere but DIR, or keep the CA's key (it is never
//! written: the CA issues only what this run asked for).

use std::path::Path;
use std::process::ExitCode;

use doorman_pki::{Ca, CertSpec};

const USAGE: &str = "usage: doorman-pki DIR NAME...";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((dir, names)) = args.split_first() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    if names.is_empty() || names.iter().any(|n| n.is_empty() || n.contains('/')) {
        eprintln!("{USAGE} (each NAME a file name, at least one)");
        return ExitCode::from(2);
    }
    match write_all(Path::new(dir), names) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("doorman-pki: {e}");
            ExitCode::FAILURE
        }
    }
}

fn write_all(dir: &Path, names: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let ca = Ca::new("doorman-pki throwaway CA")?;
    write(&dir.join("ca.pem"), ca.cert_pem())?;
    for name in names {
        let issued = ca.issue(&CertSpec::local(name))?;
        write(&dir.join(format!("{name}.pem")), &issued.cert_pem)?;
        write(&dir.join(format!("{name}.key")), &issued.key_pem)?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
