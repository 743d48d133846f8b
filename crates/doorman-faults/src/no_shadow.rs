//! The one rule the harness keeps about shadow mode: its resources are
//! never in it (the auditor checks the capacity invariant, which a shadow
//! resource is outside of).
//!
//! Must not: change a config (it only refuses one).

use anyhow::bail;

/// The harness audits the capacity invariant, which a resource in shadow
/// mode is outside of (nothing enforces its grants): a config with one is
/// refused before it is pushed.
pub fn refuse_shadow(text: &str) -> anyhow::Result<()> {
    let config = doorman_core::config::Config::parse(text, "the harness's config")?;
    if let Some(t) = config.templates().iter().find(|t| t.shadow) {
        bail!(
            "resources[{}] ({}): shadow = true: a shadow resource is outside the \
             capacity invariant the harness audits; run the harness without shadow mode",
            t.index,
            t.identifier_glob
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_shadow_resource_is_refused() {
        let plain = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 10\n\
                     [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 20\n\
                     refresh_interval = 5\n";
        assert!(super::refuse_shadow(plain).is_ok());
        let shadow = plain.replace("capacity = 10", "capacity = 10\nshadow = true");
        let e = super::refuse_shadow(&shadow).unwrap_err().to_string();
        assert!(e.contains("resources[0] (*): shadow = true"), "{e}");
    }
}
