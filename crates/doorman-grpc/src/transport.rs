//! What the gRPC port accepts from a connection, whoever is on the other
//! end: the largest message (enough for a request at the protocol's
//! limits, see [`MAX_MESSAGE_BYTES`]), concurrent streams per connection,
//! HTTP/2 keep-alive pings that drop dead peers, and an undecodable
//! protobuf answered `INVALID_ARGUMENT` (the peer sent bad bytes) rather
//! than tonic's `INTERNAL` (which says the server is broken).
//!
//! Must not: look into valid requests (validation is `validate.rs`).

use std::time::Duration;

pub use doorman_core::limits::MAX_MESSAGE_BYTES;
use tonic::codegen::http;

/// Concurrent streams (RPCs in flight) per HTTP/2 connection.
pub const MAX_CONCURRENT_STREAMS: u32 = 1024;

/// How often an idle connection is pinged, and how long the answer may
/// take before the connection is dropped.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(30);
/// See [`KEEPALIVE_INTERVAL`].
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The start of tonic's message for a protobuf it could not decode, as
/// percent-encoded in the `grpc-message` header.
const DECODE_ERROR: &str = "failed%20to%20decode%20Protobuf%20message";

/// A response's gRPC status code header (a name made once: looking a
/// header up by a string parses the name on every response).
pub const GRPC_STATUS: http::HeaderName = http::HeaderName::from_static("grpc-status");
/// A response's gRPC status message header.
const GRPC_MESSAGE: http::HeaderName = http::HeaderName::from_static("grpc-message");

/// Rewrites tonic's `INTERNAL` for an undecodable request into
/// `INVALID_ARGUMENT`, keeping the message. Other responses pass untouched.
pub fn undecodable_is_invalid_argument<B>(mut resp: http::Response<B>) -> http::Response<B> {
    let headers = resp.headers_mut();
    if is_undecodable(headers) {
        let code = (tonic::Code::InvalidArgument as i32).to_string();
        if let Ok(v) = http::HeaderValue::from_str(&code) {
            headers.insert(GRPC_STATUS, v);
        }
    }
    resp
}

/// Whether `headers` are tonic's `INTERNAL` for a request it could not
/// decode (which this port answers `INVALID_ARGUMENT`).
pub fn is_undecodable(headers: &http::HeaderMap) -> bool {
    headers.get(GRPC_STATUS).is_some_and(|v| v == "13")
        && headers
            .get(GRPC_MESSAGE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|m| m.starts_with(DECODE_ERROR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_decode_failures_are_rewritten() {
        let resp = |status: &str, msg: &str| {
            http::Response::builder()
                .header("grpc-status", status)
                .header("grpc-message", msg)
                .body(())
                .unwrap()
        };
        let r = undecodable_is_invalid_argument(resp(
            "13",
            "failed%20to%20decode%20Protobuf%20message%3A%20x",
        ));
        assert_eq!(r.headers()["grpc-status"], "3");
        let r = undecodable_is_invalid_argument(resp("13", "something%20else"));
        assert_eq!(r.headers()["grpc-status"], "13");
        let r =
            undecodable_is_invalid_argument(resp("0", "failed%20to%20decode%20Protobuf%20message"));
        assert_eq!(r.headers()["grpc-status"], "0");
    }
}
