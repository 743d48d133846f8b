//! Any bytes sent as a GetCapacity, GetServerCapacity or ReleaseCapacity
//! request (the first byte picks which): decoding, validation and the core
//! never panic; what validation lets through is answered, and the grants
//! never sum above the capacity.

#![no_main]

use std::sync::Arc;

use doorman_core::config::Config;
use doorman_core::server::{CoreOptions, ServerCore, Sharded};
use doorman_lease::Time;
use doorman_proto::doorman as pb;
use doorman_wire::validate;
use libfuzzer_sys::fuzz_target;
use prost::Message;

const CONFIG: &str = "[[resources]]\nidentifier_glob = \"*\"\ncapacity = 100\n\
                      [resources.algorithm]\nkind = \"FAIR_SHARE\"\nlease_length = 60\n\
                      refresh_interval = 5\nlearning_mode_duration = 0\n";

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    let config = Arc::new(Config::parse(CONFIG, "fuzz").unwrap());
    let mut core = ServerCore::new(CoreOptions::default(), config);
    let now = Time::from_secs(1_000_000);
    core.become_master(now);
    let checked = match which % 3 {
        0 => pb::GetCapacityRequest::decode(bytes)
            .ok()
            .map(|r| validate::get_capacity(&r)),
        1 => pb::GetServerCapacityRequest::decode(bytes)
            .ok()
            .map(|r| validate::get_server_capacity(&r)),
        _ => {
            if let Ok(r) = pb::ReleaseCapacityRequest::decode(bytes) {
                if let Ok((who, ids)) = validate::release_capacity(&r) {
                    core.release(&who, &ids).unwrap();
                }
            }
            return;
        }
    };
    let Some(Ok(checked)) = checked else {
        return;
    };
    let grants = core.get_capacity(now, &checked.request).unwrap();
    assert_eq!(grants.len(), checked.request.resources.len());
    for r in core.status(now, 0).resources {
        assert!(
            r.has <= r.capacity + 1e-6,
            "{}: has {} > capacity {}",
            r.id,
            r.has,
            r.capacity
        );
    }
});
