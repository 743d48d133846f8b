//! Master election through etcd (v3 election API).
//!
//! A session: connect, grant a lease of `ttl`, campaign on the election key
//! with our address as the value, keep the lease alive every `ttl/3`, and
//! observe the key to know the current master. Mastership is kept through
//! failed keep-alives until a whole TTL has passed since the *sending* of
//! the last successful one (etcd cannot have expired the lease earlier), so
//! two masters never overlap beyond clock skew; if etcd restarts and the
//! lease survived, the master stays master. On graceful stop the master
//! resigns and revokes its lease, so a standby takes over at once.

use std::time::Duration;

use doorman_client::Backoff;
use etcd_client::{
    Client, ConnectOptions, LeaderKey, LeaseKeepAliveStream, LeaseKeeper, ResignOptions,
};
use tokio::sync::watch;
use tokio::time::{timeout, timeout_at, Instant};

use crate::election::MasterView;

/// Settings of an etcd election.
#[derive(Debug, Clone)]
pub struct EtcdElection {
    /// etcd endpoints (`host:port` or URLs).
    pub endpoints: Vec<String>,
    /// The election key (one per node), e.g. `/doorman/root`.
    pub key: String,
    /// Lease TTL: how long a silent master stays master (default 10 s).
    pub ttl: Duration,
}

enum End {
    Stopped,
    Retry(String),
}

/// Connects to etcd with short timeouts (campaigns block, so no request
/// timeout is set; callers bound each call themselves).
pub async fn connect(endpoints: &[String], connect_timeout: Duration) -> Result<Client, String> {
    let opts = ConnectOptions::new()
        .with_connect_timeout(connect_timeout)
        .with_keep_alive(Duration::from_secs(2), connect_timeout)
        .with_require_leader(true);
    match timeout(connect_timeout * 2, Client::connect(endpoints, Some(opts))).await {
        Ok(Ok(c)) => Ok(c),
        Ok(Err(e)) => Err(format!("cannot connect to etcd {endpoints:?}: {e}")),
        Err(_) => Err(format!("cannot connect to etcd {endpoints:?}: timed out")),
    }
}

async fn observe(mut client: Client, key: String, tx: watch::Sender<Option<(Vec<u8>, String)>>) {
    loop {
        if let Ok(mut stream) = client.observe(key.clone()).await {
            while let Ok(Some(resp)) = stream.message().await {
                if let Some(kv) = resp.kv() {
                    let value = String::from_utf8_lossy(kv.value()).to_string();
                    tx.send_replace(Some((kv.key().to_vec(), value)));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl EtcdElection {
    fn ttl_secs(&self) -> i64 {
        (self.ttl.as_secs() as i64).max(1)
    }

    pub(crate) async fn run(
        self,
        me: String,
        out: watch::Sender<MasterView>,
        mut stop: watch::Receiver<bool>,
    ) {
        let seed = std::process::id() as u64 ^ 0xE7CD;
        let mut backoff = Backoff::new(
            Duration::from_millis(100),
            self.ttl.max(Duration::from_secs(1)),
            seed,
        );
        loop {
            if *stop.borrow() {
                return;
            }
            match self.session(&me, &out, &mut stop).await {
                End::Stopped => return,
                // The session has already published the step-down.
                End::Retry(why) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(key = %self.key, retry_in = ?delay, "election session ended: {why}");
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = stop.changed() => return,
                    }
                }
            }
        }
    }

    async fn session(
        &self,
        me: &str,
        out: &watch::Sender<MasterView>,
        stop: &mut watch::Receiver<bool>,
    ) -> End {
        let step = (self.ttl / 3).max(Duration::from_millis(100));
        let mut client = match connect(&self.endpoints, step).await {
            Ok(c) => c,
            Err(e) => return End::Retry(e),
        };
        let granted_at = Instant::now();
        let lease = match timeout(step, client.lease_grant(self.ttl_secs(), None)).await {
            Ok(Ok(r)) => r.id(),
            Ok(Err(e)) => return End::Retry(format!("lease grant: {e}")),
            Err(_) => return End::Retry("lease grant timed out".into()),
        };
        let (keeper, alive) = match timeout(step, client.lease_keep_alive(lease)).await {
            Ok(Ok(pair)) => pair,
            _ => return End::Retry("cannot open the lease keep-alive stream".into()),
        };
        let mut last_ok = granted_at;
        // After a failed or late keep-alive the stream is dropped and
        // reopened, so a stale answer is never credited to a newer send.
        let mut stream: Option<(LeaseKeeper, LeaseKeepAliveStream)> = Some((keeper, alive));
        let (obs_tx, mut obs_rx) = watch::channel(None);
        let observer = tokio::spawn(observe(client.clone(), self.key.clone(), obs_tx));
        let mut campaigner = client.clone();
        let campaign = campaigner.campaign(self.key.clone(), me.to_string(), lease);
        tokio::pin!(campaign);
        let mut leader: Option<LeaderKey> = None;
        let mut tick = tokio::time::interval(step);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let end = loop {
            // etcd cannot expire the lease before a TTL after the last
            // successful keep-alive was sent.
            let deadline = last_ok + self.ttl;
            tokio::select! {
                r = &mut campaign, if leader.is_none() => match r {
                    Ok(mut resp) => {
                        leader = resp.take_leader();
                        if leader.is_none() {
                            break End::Retry("campaign answered without a leader key".into());
                        }
                        if Instant::now() >= deadline {
                            break End::Retry("won the campaign after the lease may have expired".into());
                        }
                        tracing::info!(key = %self.key, "won the election");
                        out.send_replace(MasterView { is_master: true, master: Some(me.to_string()) });
                    }
                    Err(e) => break End::Retry(format!("campaign: {e}")),
                },
                _ = tokio::time::sleep_until(deadline) => {
                    break End::Retry(format!("no successful keep-alive for the TTL ({:?})", self.ttl));
                }
                _ = tick.tick() => {
                    // Never work past the deadline: the step-down above must not wait.
                    let limit = (Instant::now() + step).min(deadline);
                    if stream.is_none() {
                        if let Ok(Ok(pair)) = timeout_at(limit, client.lease_keep_alive(lease)).await {
                            stream = Some(pair);
                        }
                    }
                    if let Some((keeper, alive)) = stream.as_mut() {
                        let sent = Instant::now();
                        let r = timeout_at((sent + step).min(deadline), async {
                            keeper.keep_alive().await?;
                            alive.message().await
                        })
                        .await;
                        match r {
                            Ok(Ok(Some(resp))) if resp.ttl() > 0 => last_ok = sent,
                            Ok(Ok(Some(_))) => break End::Retry("the lease expired at etcd".into()),
                            _ => {
                                tracing::debug!(key = %self.key, "keep-alive failed; reopening the stream");
                                stream = None;
                            }
                        }
                    }
                }
                _ = obs_rx.changed() => {
                    let seen = obs_rx.borrow_and_update().clone();
                    match (&leader, seen) {
                        (Some(l), Some((key, _))) if key != l.key() => {
                            break End::Retry("another server holds the election".into());
                        }
                        (None, Some((_, addr))) => {
                            out.send_if_modified(|v| {
                                let new = Some(addr.clone());
                                let changed = v.master != new;
                                v.master = new;
                                changed
                            });
                        }
                        _ => {}
                    }
                }
                _ = stop.changed() => {
                    if let Some(l) = leader.take() {
                        let _ = timeout(Duration::from_secs(1), client.resign(Some(ResignOptions::new().with_leader(l)))).await;
                    }
                    let _ = timeout(Duration::from_secs(1), client.lease_revoke(lease)).await;
                    out.send_replace(MasterView::default());
                    tracing::info!(key = %self.key, "left the election");
                    break End::Stopped;
                }
            }
        };
        observer.abort();
        if let End::Retry(_) = &end {
            // Step down before anything else can wait.
            out.send_if_modified(|v| {
                let was = v.is_master;
                if was {
                    v.is_master = false;
                    v.master = None;
                }
                was
            });
            // Best effort, in the background: do not leave a candidate key
            // queued ahead of us.
            let mut c = client;
            tokio::spawn(async move {
                let _ = timeout(step, c.lease_revoke(lease)).await;
            });
        }
        end
    }
}
