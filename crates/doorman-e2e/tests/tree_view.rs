//! The tree at a glance through real servers: a root, a middle node of two
//! replicas electing through a real etcd, and a leaf below it with a
//! client. The root's `/api/v1/tree` shows the middle node (its master and
//! standby from the election) and the leaf below it with the client's
//! wants and the lease it holds; a killed leaf turns late there, then
//! missing once its lease can have run out (12 s leases: late at 3 s,
//! missing at up to 12 s, so the test sees both).

use std::sync::Arc;
use std::time::Duration;

use doorman_client::{Client, RateOptions};
use doorman_core::config::Config;
use doorman_core::tree::{Freshness, TreeNode};
use doorman_etcd::EtcdElection;
use doorman_net::page::PageClient;
use doorman_server::server::{ConfigSource, ServerOptions};
use doorman_testkit::config::{Resource, TestConfig};
use doorman_testkit::{free_port, EtcdProcess, IsolatedServer};

const MID: &str = "/tree-view/mid";

fn root() -> IsolatedServer {
    let cfg = TestConfig::new()
        .resource(Resource::fair("*", 100.0).lease(12).refresh(1).learning(0))
        .parse();
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), ConfigSource::Inline(cfg));
    o.http = Some(
        format!("127.0.0.1:{}", free_port().unwrap())
            .parse()
            .unwrap(),
    );
    IsolatedServer::start(o).expect("root starts")
}

fn below(parents: Vec<String>, election: Option<Arc<EtcdElection>>) -> IsolatedServer {
    let empty = ConfigSource::Inline(Arc::new(Config::empty()));
    let mut o = ServerOptions::new("127.0.0.1:0".parse().unwrap(), empty);
    o.parent = parents;
    if let Some(e) = election {
        o.election = e;
    }
    IsolatedServer::start(o).expect("server starts")
}

/// The root's tree, as `doorman tree` reads it.
async fn tree(root: &IsolatedServer) -> TreeNode {
    let http = root.http_addr.expect("an HTTP port").to_string();
    let pages = PageClient::new(None, None).unwrap();
    let page = pages
        .get(&http, "/api/v1/tree", Duration::from_secs(2))
        .await;
    serde_json::from_str(&page.expect("the page answers").body).expect("a tree")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_sees_every_node_below_it_and_which_are_late_or_missing() {
    let etcd = EtcdProcess::start().unwrap_or_else(|e| panic!("{e}"));
    let root = root();
    let election = Arc::new(EtcdElection {
        etcd: etcd.endpoints().into(),
        key: MID.into(),
        ttl: Duration::from_secs(3),
    });
    let mids = [
        below(vec![root.addr()], Some(election.clone())),
        below(vec![root.addr()], Some(election)),
    ];
    let leaf = below(mids.iter().map(IsolatedServer::addr).collect(), None);
    let client = Client::builder()
        .servers([leaf.addr()])
        .build()
        .await
        .unwrap();
    let _r = client
        .rate_resource("db", RateOptions::wants(30.0))
        .unwrap();

    let limit = Duration::from_secs(30);
    let seen = until("the whole tree at the root", limit, &root, whole).await;
    let mid = &seen.children[0];
    let master = mid.master.clone().expect("the middle node's master");
    assert!(mid.replicas.contains(&master), "{mid:?}");
    assert_eq!(seen.level, Some(0));

    // The leaf dies while its client still wants: it has refreshed within
    // a second, so its lease has more than the 3 s it takes to turn late
    // left, and the root sees it late before missing.
    leaf.kill();
    drop(client);
    let is = |f| move |t: &TreeNode| leaf_of(t).map(|l| l.freshness) == Some(f);
    until("the killed leaf is late", limit, &root, is(Freshness::Late)).await;
    let gone = until("then missing", limit, &root, is(Freshness::Missing)).await;
    let db = &leaf_of(&gone).unwrap().resources[0];
    assert!(db.lease_left_s.unwrap() <= 0.0, "{db:?}");
}

/// The middle node's first child.
fn leaf_of(t: &TreeNode) -> Option<&TreeNode> {
    t.children
        .iter()
        .find(|c| c.node_id == MID)?
        .children
        .first()
}

/// The wholly grown tree: the middle node with both replicas, the leaf
/// below it holding the client's 30 and fresh.
fn whole(t: &TreeNode) -> bool {
    let Some(mid) = t.children.iter().find(|c| c.node_id == MID) else {
        return false;
    };
    let leaf = mid.children.first();
    let db = leaf.and_then(|l| l.resources.iter().find(|r| r.id == "db"));
    mid.replicas.len() == 2
        && mid.level == Some(1)
        && db.is_some_and(|r| r.wants() == 30.0 && r.capacity == 30.0)
        && leaf.is_some_and(|l| l.level == Some(2) && l.freshness == Freshness::Fresh)
}

/// The root's tree once `ok` holds of it, within `limit`.
async fn until(
    what: &str,
    limit: Duration,
    root: &IsolatedServer,
    ok: impl Fn(&TreeNode) -> bool,
) -> TreeNode {
    let start = std::time::Instant::now();
    loop {
        let t = tree(root).await;
        if ok(&t) {
            return t;
        }
        assert!(
            start.elapsed() < limit,
            "timed out waiting for {what}: {t:#?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
