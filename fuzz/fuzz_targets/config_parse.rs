//! Any bytes given to the config parser: a config or a list of problems,
//! never a panic; a config that parses looks every id up without panicking.

#![no_main]

use doorman_core::config::Config;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match Config::from_bytes(data, "fuzz") {
        Ok(c) => {
            assert!(!c.templates().is_empty());
            for id in ["", "a", "db/users/1", "*", "é/x"] {
                let _ = c.find(id);
            }
        }
        Err(e) => assert!(!e.problems.is_empty()),
    }
});
