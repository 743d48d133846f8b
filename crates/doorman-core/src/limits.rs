//! The protocol's documented limits, defined once. Request validation
//! (`doorman-server`'s gRPC layer), the config parser, the upstream
//! aggregation, the client library and the load generator all quote these
//! constants; `docs/architecture.md` lists them.
//!
//! Must not: hold state or depend on anything.

/// Longest accepted client or server id, in bytes.
pub const MAX_ID_BYTES: usize = 256;

/// Longest accepted resource id, in bytes.
pub const MAX_RESOURCE_ID_BYTES: usize = 1024;

/// Most resources in one request (GetCapacity, GetServerCapacity,
/// ReleaseCapacity). Larger bulk requests are split by the senders.
pub const MAX_RESOURCES_PER_REQUEST: usize = 10_000;

/// Largest gRPC message a server or client accepts or sends: a
/// GetCapacity at the limits (10 000 resources with 1024-byte ids, about
/// 10.4 MB) fits. Senders split larger bulk requests by count.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;

const _: () =
    assert!(MAX_RESOURCES_PER_REQUEST * (MAX_RESOURCE_ID_BYTES + 64) <= MAX_MESSAGE_BYTES);

/// Most `[[resources]]` templates in one config: the size template lookup
/// is measured and tested at (BENCHMARKS.md, `config/lookup.rs`). A
/// larger config is rejected.
pub const MAX_TEMPLATES: usize = 50_000;

/// Most priority bands for one resource in one GetServerCapacity.
pub const MAX_BANDS: usize = 1_000;

/// Longest lease, refresh interval or learning mode, in seconds (365
/// days): a config asking for more is rejected, a parent's algorithm is
/// clamped to it, so no lease outlives any plausible restart of the tree.
pub const MAX_DURATION_SECS: i64 = 365 * 86_400;

/// Default of a template's `max_clients_per_server`: the most subclients
/// one downstream server may claim for a resource (Σ `num_clients` over its
/// bands). The default only stops absurd claims (10× the largest node of
/// the simulator's biggest scenario); set it to the client count of the
/// largest real node, so a server that lies about its clients weighs no
/// more than that. Who may call GetServerCapacity at all is the security
/// configuration's business.
pub const DEFAULT_MAX_CLIENTS_PER_SERVER: u32 = 100_000;

/// Default of a template's `open_server_share`: with no `[[access]]` rule
/// to vouch for downstream servers, one downstream server's client count
/// counts only so far as it takes at most this share of the resource
/// from everyone else who wants it (a server claiming 2^31 clients next to
/// one real client took all but 0.001 % with `max_clients_per_server`
/// alone). 1 trusts client counts as the original Doorman does.
pub const DEFAULT_OPEN_SERVER_SHARE: f64 = 0.9;

/// Largest accepted amount (wants, has, capacity): far beyond any real
/// rate, small enough that sums of many amounts stay exact enough.
pub const MAX_AMOUNT: f64 = 1e15;

/// The reason an id of `len` bytes is refused, or `None` when its length is
/// acceptable (1 to `max` bytes).
///
/// ```
/// use doorman_core::limits::{id_length_problem, MAX_ID_BYTES};
/// assert_eq!(id_length_problem(5, MAX_ID_BYTES), None);
/// assert_eq!(id_length_problem(0, MAX_ID_BYTES).unwrap(), "must not be empty");
/// assert_eq!(id_length_problem(257, MAX_ID_BYTES).unwrap(), "must be at most 256 bytes, got 257");
/// ```
pub fn id_length_problem(len: usize, max: usize) -> Option<String> {
    if len == 0 {
        Some("must not be empty".to_string())
    } else if len > max {
        Some(format!("must be at most {max} bytes, got {len}"))
    } else {
        None
    }
}

/// Whether an id (a client, server or resource id, an identity) contains a
/// control character, which every id refuses: lease owners, status pages
/// and log lines would break on one.
///
/// ```
/// use doorman_core::limits::has_control_chars;
/// assert!(!has_control_chars("db/users"));
/// assert!(has_control_chars("a\nb"));
/// ```
pub fn has_control_chars(id: &str) -> bool {
    id.chars().any(char::is_control)
}
