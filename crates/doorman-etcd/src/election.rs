//! Master election through etcd (v3 election API).
//!
//! A session: connect, grant a lease of `ttl`, campaign on the election key
//! with our address as the value, keep the lease alive every `ttl/3`, and
//! observe the key to know the current master. Mastership is kept through
//! failed keep-alives until a whole TTL has passed since the *sending* of
//! the last successful one (etcd cannot have expired the lease earlier), so
//! two masters never overlap beyond clock skew; if etcd restarts and the
//! lease survived, the master stays master. On graceful stop the master
//! resigns and revokes its lease, so a standby takes over at once. Leaving
//! mastership follows the order in `doorman-election`: stop granting,
//! publish, then release (resign, revoke). Taking office goes: read the
//! lease horizon record, move it on (`horizon.rs`), then publish; while
//! master, the record is moved on whenever the core says it is due.
//!
//! Must not: stay master after etcd can have expired its lease.

use std::time::Duration;

use doorman_core::server::{take_office, Office};
use doorman_core::Backoff;
use doorman_lease::Time;
use etcd_client::{Client, LeaderKey, LeaseKeepAliveStream, LeaseKeeper, ResignOptions};
use tokio::sync::watch;
use tokio::time::{timeout, timeout_at, Instant};

use doorman_election::{
    Candidacy, LeaseHorizon, MasterView, MastershipProof, SessionFlag, StopGranting,
};

use crate::horizon;
use crate::{connect, EtcdError, EtcdOptions};

/// Settings of an etcd election.
#[derive(Debug, Clone)]
pub struct EtcdElection {
    /// Where etcd is and how to authenticate to it.
    pub etcd: EtcdOptions,
    /// The election key (one per node), e.g. `/doorman/root`.
    pub key: String,
    /// Lease TTL: how long a silent master stays master (default 10 s).
    pub ttl: Duration,
}

enum End {
    Stopped,
    Retry(String),
}

/// Publishes each leader of the election as (leader key, address), and
/// `None` whenever the stream broke (a leader may have come and gone
/// unseen meanwhile).
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
        tx.send_replace(None);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

impl EtcdElection {
    fn ttl_secs(&self) -> i64 {
        (self.ttl.as_secs() as i64).max(1)
    }

    pub(crate) async fn campaign_until_stopped(self, c: Candidacy) {
        let Candidacy {
            me,
            out,
            mut stop,
            stop_granting,
            session,
            horizon,
            proof,
        } = c;
        session.set(false);
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
            let roles = Roles {
                me: &me,
                out: &out,
                stop_granting: &stop_granting,
                session: &session,
                horizon: &horizon,
                proof: &proof,
            };
            let end = self.session(roles, &mut stop);
            let end = end.await;
            session.set(false);
            match end {
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

    /// Connects, grants a lease of `ttl` and opens its keep-alive stream.
    async fn open(&self, step: Duration) -> Result<Session, EtcdError> {
        let mut client = connect(&self.etcd, step).await?;
        let granted_at = crate::clock::instant();
        let lease = timeout(step, client.lease_grant(self.ttl_secs(), None))
            .await
            .map_err(EtcdError::timed_out("lease grant"))?
            .map_err(EtcdError::failed("lease grant"))?
            .id();
        let what = "opening the lease keep-alive stream";
        let stream = timeout(step, client.lease_keep_alive(lease))
            .await
            .map_err(EtcdError::timed_out(what))?
            .map_err(EtcdError::failed(what))?;
        Ok(Session {
            client,
            lease,
            step,
            last_ok: granted_at,
            stream: Some(stream),
            leader: None,
            last_leader: None,
            horizon_lease: None,
        })
    }

    /// One session: campaign, keep the lease alive, observe the key, until
    /// stopped or something fails.
    async fn session(&self, r: Roles<'_>, stop: &mut watch::Receiver<bool>) -> End {
        let Roles {
            me,
            out,
            stop_granting,
            session,
            horizon,
            proof,
        } = r;
        let step = (self.ttl / 3).max(Duration::from_millis(100));
        let mut s = match self.open(step).await {
            Ok(s) => s,
            Err(e) => return End::Retry(e.to_string()),
        };
        session.set(true);
        let (obs_tx, mut obs_rx) = watch::channel(None);
        let observer = tokio::spawn(observe(s.client.clone(), self.key.clone(), obs_tx));
        let mut campaigner = s.client.clone();
        let campaign = campaigner.campaign(self.key.clone(), me.to_string(), s.lease);
        tokio::pin!(campaign);
        let mut tick = crate::clock::ticker(step);
        let mut horizon_tick = crate::clock::ticker(HORIZON_CHECK);
        let end = loop {
            // etcd cannot expire the lease before a TTL after the last
            // successful keep-alive was sent.
            let deadline = s.last_ok + self.ttl;
            let ended = tokio::select! {
                r = &mut campaign, if s.leader.is_none() => match self.campaigned(&mut s, r, deadline) {
                    None => self.take_office(&mut s, (deadline, proof), me, out, horizon).await,
                    end => end,
                },
                _ = horizon_tick.tick(), if s.leader.is_some() => self.keep_horizon(&mut s, deadline, horizon).await,
                _ = horizon.upstream_answered(), if s.leader.is_some() => self.keep_horizon(&mut s, deadline, horizon).await,
                _ = tokio::time::sleep_until(deadline) => {
                    Some(End::Retry(format!("no successful keep-alive for the TTL ({:?})", self.ttl)))
                }
                _ = tick.tick() => {
                    let end = s.keep_alive(deadline, &self.key).await;
                    // etcd cannot expire the lease before a TTL after the
                    // last keep-alive that got through was sent.
                    proof.until(s.last_ok + self.ttl);
                    end
                }
                _ = obs_rx.changed() => {
                    let seen = obs_rx.borrow_and_update().clone();
                    s.observed(seen, out)
                }
                _ = stop.changed() => Some(s.leave(out, stop_granting, &self.key).await),
            };
            if let Some(end) = ended {
                break end;
            }
        };
        observer.abort();
        if let End::Retry(_) = &end {
            s.abandon(out, stop_granting);
        }
        end
    }

    /// The campaign answered: this server may take office unless the lease
    /// may already have expired.
    fn campaigned(
        &self,
        s: &mut Session,
        r: Result<etcd_client::CampaignResponse, etcd_client::Error>,
        deadline: Instant,
    ) -> Option<End> {
        let mut resp = match r {
            Ok(resp) => resp,
            Err(e) => return Some(End::Retry(format!("campaign: {e}"))),
        };
        s.leader = resp.take_leader();
        if s.leader.is_none() {
            return Some(End::Retry("campaign answered without a leader key".into()));
        }
        if crate::clock::instant() >= deadline {
            return Some(End::Retry(
                "won the campaign after the lease may have expired".into(),
            ));
        }
        None
    }

    /// Won: read what the predecessors recorded, record this master's own
    /// horizon (never earlier than a plausible record), then publish. A
    /// record that cannot be read or written ends the session (without it
    /// this server could not bound its leases), and so does the lease
    /// deadline passing meanwhile: no etcd call here outlives it.
    async fn take_office(
        &self,
        s: &mut Session,
        (deadline, proof): (Instant, &MastershipProof),
        me: &str,
        out: &watch::Sender<MasterView>,
        lease_horizon: &LeaseHorizon,
    ) -> Option<End> {
        let key = horizon::key(&self.key);
        let limit = (crate::clock::instant() + s.step).min(deadline);
        let record = match horizon::read(&mut s.client, &key, limit).await {
            Ok(r) => r,
            Err(e) => return Some(End::Retry(e.to_string())),
        };
        let Office {
            predecessors,
            bound,
            why,
        } = take_office(
            record.as_ref(),
            s.last_leader.as_deref(),
            lease_horizon.fresh(),
            lease_horizon.now(),
        );
        match s.record(&key, (bound, lease_horizon.now()), deadline).await {
            Ok(true) => {}
            Ok(false) => return Some(End::Retry(format!("could not write {key}"))),
            Err(end) => return Some(end),
        }
        if crate::clock::instant() >= deadline {
            return Some(End::Retry(
                "took office after the lease may have expired".into(),
            ));
        }
        tracing::info!(key = %self.key, ?predecessors, "won the election; learning from {why}");
        proof.until(deadline);
        out.send_replace(MasterView {
            is_master: true,
            master: Some(me.to_string()),
            predecessors,
            lease_bound: Some(bound),
        });
        None
    }

    /// Moves the horizon record on when the core says it is due. If it
    /// cannot, the last record keeps bounding the leases, which get shorter
    /// as it nears; once it is within its `renew_before` the master
    /// steps down rather than hand out leases that end at once.
    async fn keep_horizon(
        &self,
        s: &mut Session,
        deadline: Instant,
        lease_horizon: &LeaseHorizon,
    ) -> Option<End> {
        let at = lease_horizon.due()?;
        let now = lease_horizon.now();
        match s
            .record(&horizon::key(&self.key), (at, now), deadline)
            .await
        {
            Ok(true) => {
                lease_horizon.recorded(at);
                None
            }
            Ok(false)
                if lease_horizon
                    .left()
                    .is_some_and(|l| l < lease_horizon.renew_before()) =>
            {
                Some(End::Retry(
                    "the lease horizon record could not be moved on and leases would end now"
                        .into(),
                ))
            }
            Ok(false) => None,
            Err(end) => Some(end),
        }
    }
}

/// The election's links to the rest of the server, for one session.
#[derive(Clone, Copy)]
struct Roles<'a> {
    me: &'a str,
    out: &'a watch::Sender<MasterView>,
    stop_granting: &'a StopGranting,
    session: &'a SessionFlag,
    horizon: &'a LeaseHorizon,
    proof: &'a MastershipProof,
}

/// How often a master checks whether its horizon record must move on
/// (well within a root's `HORIZON_RENEW_BEFORE`; about every upstream
/// renewal for an intermediate).
const HORIZON_CHECK: Duration = Duration::from_secs(1);

/// A live etcd session: the client, the lease and its keep-alive stream,
/// and the leader key once the campaign is won.
struct Session {
    client: Client,
    lease: i64,
    step: Duration,
    /// When the last successful keep-alive was sent.
    last_ok: Instant,
    /// After a failed or late keep-alive the stream is dropped and
    /// reopened, so a stale answer is never credited to a newer send.
    stream: Option<(LeaseKeeper, LeaseKeepAliveStream)>,
    leader: Option<LeaderKey>,
    /// The leader key last seen holding the election, if this session has
    /// seen every leader since (`None` after a gap in the observation).
    last_leader: Option<Vec<u8>>,
    /// The etcd lease of the horizon record this session last wrote.
    horizon_lease: Option<i64>,
}

impl Session {
    /// Writes the horizon record (lasting until `at`, at `now`) as the
    /// leader: `Ok(true)` once written (the etcd lease of the record it
    /// replaces revoked), `Ok(false)` if etcd did not answer (the last
    /// record still bounds the leases), an end if this server no longer
    /// holds the election.
    async fn record(
        &mut self,
        key: &str,
        (at, now): (Time, Time),
        deadline: Instant,
    ) -> Result<bool, End> {
        let Some(leader) = self.leader.clone() else {
            return Ok(false);
        };
        let limit = (crate::clock::instant() + self.step).min(deadline);
        match horizon::write(&mut self.client, key, &leader, (at, now), limit).await {
            Ok(Some(lease)) => {
                if let Some(old) = self.horizon_lease.replace(lease) {
                    // In the background: the election's loop never waits.
                    let mut c = self.client.clone();
                    tokio::spawn(async move { horizon::revoke(&mut c, old).await });
                }
                Ok(true)
            }
            Ok(None) => Err(End::Retry(format!(
                "lost the election key while writing {key}"
            ))),
            Err(e) => {
                tracing::warn!("{e}: leases stay within the last recorded horizon");
                Ok(false)
            }
        }
    }

    /// Sends one keep-alive, never working past `deadline` (the step-down
    /// must not wait).
    async fn keep_alive(&mut self, deadline: Instant, key: &str) -> Option<End> {
        let limit = (crate::clock::instant() + self.step).min(deadline);
        if self.stream.is_none() {
            if let Ok(Ok(pair)) = timeout_at(limit, self.client.lease_keep_alive(self.lease)).await
            {
                self.stream = Some(pair);
            }
        }
        let (keeper, alive) = self.stream.as_mut()?;
        let sent = crate::clock::instant();
        let r = timeout_at((sent + self.step).min(deadline), async {
            keeper.keep_alive().await?;
            alive.message().await
        })
        .await;
        match r {
            Ok(Ok(Some(resp))) if resp.ttl() > 0 => self.last_ok = sent,
            Ok(Ok(Some(_))) => return Some(End::Retry("the lease expired at etcd".into())),
            _ => {
                tracing::debug!(%key, "keep-alive failed; reopening the stream");
                self.stream = None;
            }
        }
        None
    }

    /// The observed holder of the election key changed.
    fn observed(
        &mut self,
        seen: Option<(Vec<u8>, String)>,
        out: &watch::Sender<MasterView>,
    ) -> Option<End> {
        // Our own candidate key (etcd names it `<election>/<lease in hex>`)
        // shows up here when we win, possibly before the campaign's answer:
        // it is not a predecessor.
        let own = |key: &[u8]| key.ends_with(format!("/{:x}", self.lease).as_bytes());
        if self.leader.is_none() && !seen.as_ref().is_some_and(|(key, _)| own(key)) {
            self.last_leader = seen.as_ref().map(|(key, _)| key.clone());
        }
        match (&self.leader, seen) {
            (Some(l), Some((key, _))) if key != l.key() => {
                Some(End::Retry("another server holds the election".into()))
            }
            (None, Some((_, addr))) => {
                out.send_if_modified(|v| {
                    let new = Some(addr.clone());
                    let changed = v.master != new;
                    v.master = new;
                    changed
                });
                None
            }
            _ => None,
        }
    }

    /// Graceful stop: stop granting, publish "not master", then resign
    /// and revoke the lease.
    async fn leave(
        &mut self,
        out: &watch::Sender<MasterView>,
        stop_granting: &StopGranting,
        key: &str,
    ) -> End {
        stop_granting.and_publish(out);
        let one_second = Duration::from_secs(1);
        if let Some(l) = self.leader.take() {
            let resign = ResignOptions::new().with_leader(l);
            let _ = timeout(one_second, self.client.resign(Some(resign))).await;
        }
        let _ = timeout(one_second, self.client.lease_revoke(self.lease)).await;
        tracing::info!(%key, "left the election");
        End::Stopped
    }

    /// The session failed: step down (or, as a standby, forget the master)
    /// before anything else can wait, then revoke the lease in the
    /// background so no candidate key of ours stays queued ahead of the
    /// others.
    fn abandon(self, out: &watch::Sender<MasterView>, stop_granting: &StopGranting) {
        // A master steps down; a standby forgets a master it can no longer
        // observe, so it answers "unavailable" rather than redirecting to a
        // master that may be gone.
        stop_granting.now(None);
        out.send_if_modified(|v| {
            let changed = v.is_master || v.master.is_some();
            v.is_master = false;
            v.master = None;
            changed
        });
        let (mut c, lease, step) = (self.client, self.lease, self.step);
        tokio::spawn(async move {
            let _ = timeout(step, c.lease_revoke(lease)).await;
        });
    }
}
