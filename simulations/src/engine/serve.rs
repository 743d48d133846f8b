//! The network and the server tasks: sending an RPC from a caller to a task
//! of a node, and what the task does with it, as `doorman server` would:
//!
//! * a node cut off the network (`unreachable`) neither receives nor sends:
//!   an RPC to it, or from it, is lost until the cut ends, and TCP sends it
//!   again on its timers (`tcp.rs`); the first copy after the cut gets
//!   through if it leaves before the call's deadline (`Link::deadline`:
//!   half the refresh interval of the leases it renews, at least 1 s, at
//!   most [`RPC_TIMEOUT`]), else the call fails at its deadline, as it does
//!   when the answer would come after it;
//! * a crashed task (a lost master, until the next election) refuses
//!   connections: the request arrives (after the connect's round trip on
//!   a new connection) and the failure is back one network delay later;
//! * the master answers from its real core; a standby answers Discovery and
//!   every capacity RPC with the master it believes in (a redirect).
//!
//! Must not: decide anything about leases (the master's core does) or what
//! the caller does next (`link.rs`, `rpc.rs`).

use doorman_core::server::{Refusal, Sharded};
use doorman_lease::Time;

use super::tcp::retransmitted;
use super::{Caller, Ev, Reply, RpcMsg, Sim, RPC_TIMEOUT};

/// Who sent an RPC to whom, and when it was first sent (and whether on a
/// new connection).
#[derive(Debug, Clone, Copy)]
struct Rpc {
    from: (Caller, u64),
    to: (usize, usize),
    sent: (Time, bool),
}

impl Sim {
    /// The node a caller talks to: a client's leaf, a node's parent.
    pub(super) fn target(&self, caller: Caller) -> Option<usize> {
        match caller {
            Caller::Client(c) => Some(self.clients[c].leaf),
            Caller::Node(n) => self.nodes[n].parent,
        }
    }

    /// Sends `msg` from `caller` to task `task` of its target node.
    pub(super) fn send(&mut self, caller: Caller, task: usize, msg: RpcMsg) {
        let now = self.now();
        let Some(node) = self.target(caller) else {
            return;
        };
        let link = self.link_mut(caller);
        let epoch = link.epoch();
        let deadline = link.deadline().unwrap_or(RPC_TIMEOUT);
        let connect = link.connect(task);
        match msg {
            RpcMsg::Discovery => self.rpcs.discovery += 1,
            RpcMsg::Capacity(_) => self.rpcs.capacity += 1,
        }
        self.rpcs.connects += u64::from(connect);
        // A caller cut off loses what it sends until the cut ends.
        let leaves = match caller {
            Caller::Node(n) if self.partitioned(n) => {
                let until = self.nodes[n].unreachable_until;
                retransmitted(now, until, connect, now + deadline)
            }
            _ => Some(now),
        };
        let Some(leaves) = leaves else {
            self.time_out(now + deadline, caller, epoch, task);
            return;
        };
        let mut d = self.delay();
        if connect {
            d = d + self.delay() + self.delay();
        }
        let rpc = Rpc {
            from: (caller, epoch),
            to: (node, task),
            sent: (now, connect),
        };
        self.arrive_at(leaves + d, rpc, msg);
    }

    /// `msg` of `rpc` reaches its task at `at`.
    fn arrive_at(&mut self, at: Time, rpc: Rpc, msg: RpcMsg) {
        let ((caller, epoch), (node, task)) = (rpc.from, rpc.to);
        let sent = rpc.sent;
        let arrive = Ev::Arrive {
            caller,
            epoch,
            node,
            task,
            sent,
            msg,
        };
        self.push(at, arrive);
    }

    /// An RPC reaches task `task` of `node` (lost there if the node is cut
    /// off: it comes again on the sender's retransmission timer).
    pub(super) fn arrive(
        &mut self,
        (caller, epoch): (Caller, u64),
        (node, task): (usize, usize),
        (sent, fresh): (Time, bool),
        msg: RpcMsg,
    ) {
        let now = self.now();
        let give_up = sent + self.link_mut(caller).deadline().unwrap_or(RPC_TIMEOUT);
        if self.partitioned(node) {
            let until = self.nodes[node].unreachable_until;
            match retransmitted(sent, until, fresh, give_up) {
                Some(again) => {
                    let rpc = Rpc {
                        from: (caller, epoch),
                        to: (node, task),
                        sent: (sent, fresh),
                    };
                    let at = again + self.delay();
                    self.arrive_at(at, rpc, msg);
                }
                None => self.time_out(give_up.max(now), caller, epoch, task),
            }
            return;
        }
        let reply = self.answer(node, task, msg);
        let d = self.delay();
        // On an open stream the answer comes after what was pushed before.
        let stream = self.stream_mut(caller);
        let at = if stream.open_to(task, epoch) {
            stream.down(now + d)
        } else {
            now + d
        };
        if at > give_up {
            // Decided, but the caller has given up by then.
            self.time_out(give_up.max(now), caller, epoch, task);
        } else {
            self.reply_at(at, caller, epoch, task, reply);
        }
    }

    /// An RPC that fails at its deadline `at` (its node cut off).
    fn time_out(&mut self, at: Time, caller: Caller, epoch: u64, task: usize) {
        self.rpcs.timed_out += 1;
        self.reply_at(at, caller, epoch, task, Reply::Failed);
    }

    /// `reply` reaches the caller at `at`.
    fn reply_at(&mut self, at: Time, caller: Caller, epoch: u64, task: usize, reply: Reply) {
        let ev = Ev::Reply {
            caller,
            epoch,
            task,
            reply,
        };
        self.push(at, ev);
    }

    /// What task `task` of `node` answers.
    fn answer(&mut self, node: usize, task: usize, msg: RpcMsg) -> Reply {
        let now = self.now();
        let n = &mut self.nodes[node];
        if n.dead == Some(task) {
            self.rpcs.refused += 1;
            return Reply::Failed;
        }
        let is_master = n.master == Some(task);
        match msg {
            RpcMsg::Discovery => Reply::Discovery {
                is_master,
                master: if is_master { Some(task) } else { n.view },
            },
            RpcMsg::Capacity(_) if !is_master => {
                self.rpcs.redirects += 1;
                Reply::Redirect(n.view)
            }
            RpcMsg::Capacity(req) => {
                n.served += 1;
                let decided = n.core.decide(now, &req);
                if decided.wake_upstream {
                    self.schedule_upstream(node, Some(now));
                }
                if decided.moved {
                    self.moved(node);
                }
                match decided.grants {
                    Ok(grants) => Reply::Grants(grants),
                    Err(Refusal::NotMaster(_)) => Reply::Redirect(self.nodes[node].view),
                    Err(Refusal::NoConfig(_)) => Reply::Failed,
                }
            }
        }
    }
}
