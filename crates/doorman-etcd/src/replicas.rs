//! [`EtcdElection`] as an [`Election`]: running it (`election.rs`), the
//! node's id towards its parent (the election key), and listing the
//! servers campaigning in it for the tree at a glance: etcd's election
//! keeps one key per candidate under the election key's prefix, its value
//! the candidate's address.
//!
//! Must not: hold a connection between listings (one is opened per call,
//! every few seconds at most).

use std::time::Duration;

use doorman_election::{Candidacy, Election, ElectionFuture, ReplicasFuture};
use etcd_client::GetOptions;
use tokio::time::timeout;

use crate::{connect, EtcdElection};

/// How long one listing may take, connecting included.
const LIST_TIMEOUT: Duration = Duration::from_secs(2);

impl Election for EtcdElection {
    fn run(&self, c: Candidacy) -> ElectionFuture {
        Box::pin(self.clone().campaign_until_stopped(c))
    }

    fn node_id(&self) -> Option<String> {
        Some(self.key.clone())
    }

    fn replicas(&self) -> Option<ReplicasFuture> {
        let me = self.clone();
        Some(Box::pin(async move {
            let listed = timeout(LIST_TIMEOUT, me.candidates()).await;
            listed.map_err(|_| format!("listing {} timed out", me.key))?
        }))
    }
}

impl EtcdElection {
    /// The values under `KEY/`: each candidate's address, oldest first.
    async fn candidates(&self) -> Result<Vec<String>, String> {
        let mut client = connect(&self.etcd, LIST_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        let prefix = format!("{}/", self.key);
        let opts = GetOptions::new().with_prefix().with_sort(
            etcd_client::SortTarget::Create,
            etcd_client::SortOrder::Ascend,
        );
        let resp = client
            .get(prefix, Some(opts))
            .await
            .map_err(|e| format!("listing {}: {e}", self.key))?;
        Ok(resp
            .kvs()
            .iter()
            .map(|kv| String::from_utf8_lossy(kv.value()).to_string())
            .collect())
    }
}
