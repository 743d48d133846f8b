//! The HTML status page: one server's level and role in the tree, its
//! election and parent link, config, templates, resources (learning mode,
//! shadow mode, the parent's lease), bands and leases, rendered from a [`Status`]
//! snapshot.
//!
//! Must not: read or change server state (it gets a snapshot).

use std::fmt::Write as _;

use doorman_core::server::{ResourceStatus, Status};
use doorman_core::tree::TreeNode;

use crate::html::{esc, num};
use crate::tree_page::{render_tree, TREE_CSS};

/// Reloads the tree section from `/debug/tree` every 2 s.
const TREE_REFRESH: &str = "<script>setInterval(function(){fetch('/debug/tree').then(function(r){return r.ok?r.text():null}).then(function(t){if(t!==null)document.getElementById('tree').innerHTML=t}).catch(function(){})},2000)</script>";

/// Renders the status page; with `tree`, the tree below this server
/// too, refreshed live.
pub fn render_html(s: &Status, tree: Option<&TreeNode>) -> String {
    let mut h = String::with_capacity(4096);
    let role = if s.is_master {
        "master".to_string()
    } else {
        match &s.master_address {
            Some(m) => format!("standby (master: {})", esc(m)),
            None => "standby (master unknown)".to_string(),
        }
    };
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>doorman {id}</title>\
         <style>body{{font-family:sans-serif;margin:1.5em}}table{{border-collapse:collapse;margin:.5em 0 1.5em}}\
         td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}th{{background:#eee}}\
         td.l,th.l{{text-align:left}}{tree_css}</style></head><body>\
         <h1>doorman server {id}</h1><p>Role: <b>{role}</b> · \
         {leases} live leases · {unmatched} unmatched-resource requests</p>\
         <p>Tree: {tree}</p><p>Election: {election}</p>{parent}\
         <p>Config: {summary}</p><p>Version: {version}</p>",
        tree_css = TREE_CSS,
        tree = level(s),
        election = election(s),
        parent = parent(s),
        id = esc(&s.server_id),
        leases = s.leases,
        unmatched = s.unmatched_requests,
        summary = esc(&s.config_summary),
        version = esc(s.config_version.as_deref().unwrap_or("(inline or none)")),
    );
    if let Some(t) = tree {
        let _ = write!(
            h,
            "<h2>The tree below</h2><div id=tree>{}</div>{TREE_REFRESH}",
            render_tree(t)
        );
    }
    templates_table(&mut h, s);
    resources_table(&mut h, s);
    for r in &s.resources {
        resource_details(&mut h, r);
    }
    h.push_str("</body></html>\n");
    h
}

/// "level 2, intermediate" (the level as far as the parent said it).
fn level(s: &Status) -> String {
    match s.level {
        Some(l) => format!("level <b>{l}</b>, {}", s.role),
        None => format!("level unknown (the parent has not said), {}", s.role),
    }
}

fn election(s: &Status) -> String {
    let session = if s.election_session_up {
        "session up"
    } else {
        "<b>no election session</b>"
    };
    match (s.is_master, &s.master_address) {
        (true, _) => format!("this server is the master · {session}"),
        (false, Some(m)) => format!("standby, master {} · {session}", esc(m)),
        (false, None) => format!("<b>master unknown</b> · {session}"),
    }
}

/// The parent link's paragraph (none at the root).
fn parent(s: &Status) -> String {
    let Some(l) = &s.parent_link else {
        return String::new();
    };
    let last = match l.last_success_unix {
        Some(t) => format!("last answer {:.1} s ago", (s.now - t).max(0.0)),
        None => "no answer yet".into(),
    };
    let state = match (&l.last_error, l.failing) {
        (Some(e), true) => format!("<b>failing</b>: {}", esc(e)),
        _ if l.calls == 0 => "not used yet".into(),
        _ => "ok".into(),
    };
    format!("<p>Parent link: {state} · {last} · {} calls</p>", l.calls)
}

fn templates_table(h: &mut String, s: &Status) {
    h.push_str("<h2>Templates</h2><table><tr><th class=l>glob</th><th>capacity</th><th>safe</th><th class=l>algorithm</th><th>lease</th><th>refresh</th><th>learning</th><th class=l>enforced</th><th class=l>description</th></tr>");
    for t in &s.templates {
        let _ = write!(
            h,
            "<tr><td class=l>{}</td><td>{}</td><td>{}</td><td class=l>{}</td><td>{}s</td><td>{}s</td><td>{}s</td><td class=l>{}</td><td class=l>{}</td></tr>",
            esc(&t.identifier_glob),
            num(t.capacity),
            t.safe_capacity.map(num).unwrap_or_else(|| "dynamic".into()),
            t.kind,
            t.lease_length,
            t.refresh_interval,
            t.learning_mode_duration,
            if t.shadow { "<b>shadow</b>" } else { "yes" },
            esc(t.description.as_deref().unwrap_or("")),
        );
    }
    h.push_str("</table>");
}

fn resources_table(h: &mut String, s: &Status) {
    h.push_str("<h2>Resources</h2><table><tr><th class=l>resource</th><th class=l>template</th><th class=l>algorithm</th><th>capacity</th><th>Σ has</th><th>Σ wants</th><th>requesters</th><th>subclients</th><th>safe</th><th class=l>mode</th></tr>");
    for r in &s.resources {
        let mode = mode(r);
        let _ = write!(
            h,
            "<tr><td class=l><a href=\"#r-{id}\">{id}</a></td><td class=l>{}</td><td class=l>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=l>{}</td></tr>",
            esc(&r.template),
            r.kind,
            num(r.capacity),
            num(r.has),
            num(r.wants),
            r.requesters,
            num(r.subclients),
            num(r.safe_capacity),
            mode,
            id = esc(&r.id),
        );
    }
    h.push_str("</table>");
}

/// Learning or normal, shadow mode, and for an intermediate its lease
/// from the parent.
fn mode(r: &ResourceStatus) -> String {
    let mut m = if r.learning {
        format!("learning ({:.0} s left)", r.learning_remaining.ceil())
    } else {
        "normal".into()
    };
    if r.shadow {
        m.push_str(" · <b>shadow</b> (not enforced)");
    }
    if let Some(u) = &r.upstream {
        let _ = match u.expires_in {
            Some(e) if e > 0.0 => write!(m, " · parent lease {} for {e:.0} s", num(u.capacity)),
            Some(_) => write!(m, " · <b>parent lease expired</b>"),
            None => write!(m, " · <b>no parent lease yet</b>"),
        };
    }
    m
}

fn resource_details(h: &mut String, r: &ResourceStatus) {
    let _ = write!(h, "<h3 id=\"r-{id}\">{id}</h3>", id = esc(&r.id));
    if !r.bands.is_empty() {
        h.push_str(
            "<table><tr><th>band</th><th>demands</th><th>subclients</th><th>Σ wants</th></tr>",
        );
        for b in &r.bands {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                b.priority,
                b.demands,
                num(b.subclients),
                num(b.wants)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<table><tr><th class=l>requester</th><th>priority</th><th>subclients</th><th>wants</th><th>has</th><th>target</th><th>expires in</th><th>last request</th></tr>");
    for l in &r.leases {
        let _ = write!(
            h,
            "<tr><td class=l>{}:{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}s</td><td>{:.1}s ago</td></tr>",
            l.kind,
            esc(&l.id),
            l.priority,
            num(l.subclients),
            num(l.wants),
            num(l.has),
            num(l.target),
            l.expires_in,
            l.last_request_ago,
        );
    }
    h.push_str("</table>");
    if r.leases_truncated {
        let _ = write!(
            h,
            "<p>Showing {} of {} leases (<a href=\"?leases={}\">more</a>).</p>",
            r.leases.len(),
            r.requesters,
            r.requesters
        );
    }
}
