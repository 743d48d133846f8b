//! What each server says it granted, read from its pages: ours from
//! `/api/v1/status`, the original's from `/debug/resources` (an HTML table
//! whose lease ends are Go's `time.Time` as printed, in the server's wall
//! clock, compared here with this machine's: one clock, one host).
//!
//! Must not: change anything on the servers it reads.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::LazyLock;

use regex::Regex;

use crate::http::Http;
use crate::leases::resource_status;

/// A server's capacity for the resource and the unexpired leases of its
/// holders (holder → amount).
pub type View = (f64, BTreeMap<String, f64>);

/// Our server's view of `resource`, or `None` if its page did not answer.
pub async fn ours(http: &Http, addr: SocketAddr, resource: &str) -> Option<View> {
    let path = format!("/api/v1/status?resource={resource}");
    let status: serde_json::Value = serde_json::from_str(&http.get(addr, &path).await?).ok()?;
    let Some(r) = resource_status(&status, resource) else {
        return Some((0.0, BTreeMap::new()));
    };
    let leases = r["leases"].as_array().into_iter().flatten();
    let unexpired = leases.filter(|l| l["expires_in"].as_f64().unwrap_or(0.0) > 0.0);
    let held = unexpired.filter_map(|l| Some((l["id"].as_str()?.to_string(), l["has"].as_f64()?)));
    Some((r["capacity"].as_f64().unwrap_or(0.0), held.collect()))
}

static ROW: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"<tr>\s*<td>([^<]*)</td>\s*<td>([^<]*)</td>\s*<td>[^<]*</td>\s*<td>([^<]*)</td>\s*<td>[^<]*</td>\s*</tr>",
    )
    .expect("a valid pattern")
});
static CAPACITY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"<td><a href="\?resource=([^"]+)">[^<]*</a></td>\s*<td>([^<]*)</td>"#)
        .expect("a valid pattern")
});
static EXPIRY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(\.\d+)? ([+-])(\d\d)(\d\d)")
        .expect("a valid pattern")
});

/// The original server's view of `resource` at wall time `now_s` (seconds
/// since the epoch), or `None` if its page did not answer.
pub async fn original(http: &Http, addr: SocketAddr, resource: &str, now_s: f64) -> Option<View> {
    let path = format!("/debug/resources?resource={resource}");
    Some(parse_original(
        &http.get(addr, &path).await?,
        resource,
        now_s,
    ))
}

/// [`original`]'s reading of the page's text.
pub fn parse_original(page: &str, resource: &str, now_s: f64) -> View {
    let text = page.replace("&#43;", "+").replace("&amp;", "&");
    let mut leases = BTreeMap::new();
    for row in ROW.captures_iter(&text) {
        let Some(end) = go_time_s(&row[2]) else {
            continue;
        };
        if let (true, Ok(has)) = (end > now_s, row[3].trim().parse::<f64>()) {
            leases.insert(row[1].trim().to_string(), has);
        }
    }
    let capacity = CAPACITY
        .captures_iter(&text)
        .find(|c| &c[1] == resource)
        .and_then(|c| c[2].trim().parse().ok())
        .unwrap_or(0.0);
    (capacity, leases)
}

/// Seconds since the epoch of a Go `time.Time` as printed
/// (`2026-11-28 21:00:00.123456789 +0000 UTC`).
pub fn go_time_s(text: &str) -> Option<f64> {
    let c = EXPIRY.captures(text)?;
    let n = |i: usize| c[i].parse::<i64>().ok();
    let days = days_from_civil(n(1)?, n(2)?, n(3)?);
    let secs = days * 86_400 + n(4)? * 3_600 + n(5)? * 60 + n(6)?;
    let frac = c
        .get(7)
        .map_or(Some(0.0), |f| format!("0{}", f.as_str()).parse().ok())?;
    let offset = (n(9)? * 3_600 + n(10)? * 60) * if &c[8] == "-" { -1 } else { 1 };
    Some((secs - offset) as f64 + frac)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_times_read_as_the_epoch_seconds_they_name() {
        assert_eq!(go_time_s("1970-01-01 00:00:00 +0000 UTC"), Some(0.0));
        let t = go_time_s("2026-11-28 21:00:00.5 +0100 CET").unwrap();
        assert_eq!(t, 1_795_899_600.5 - 3_600.0);
        assert_eq!(
            go_time_s("2000-03-01 00:00:00 -0030 X"),
            Some(951_870_600.0)
        );
        assert_eq!(go_time_s("not a time"), None);
    }

    #[test]
    fn the_originals_page_gives_unexpired_leases_and_the_capacity() {
        let page = r#"<td><a href="?resource=res">res</a></td> <td>100</td>
            <tr> <td>go-a1</td> <td>2026-11-28 21:00:10 &#43;0000 UTC</td> <td>x</td> <td>50</td> <td>y</td> </tr>
            <tr><td>go-a2</td><td>2026-11-28 20:59:50 +0000 UTC</td><td>x</td><td>30</td><td>y</td></tr>"#;
        let now = go_time_s("2026-11-28 21:00:00 +0000 UTC").unwrap();
        let (capacity, leases) = parse_original(page, "res", now);
        assert_eq!(capacity, 100.0);
        assert_eq!(leases, BTreeMap::from([("go-a1".to_string(), 50.0)]));
    }
}
