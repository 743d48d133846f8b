//! The caller's side of the connection to one Doorman node, step for step
//! as `doorman_client::Connector` does it for the client library and for
//! an intermediate server's upstream task:
//!
//! * one call at a time: the caller's loop awaits each call, so nothing new
//!   is sent while one is outstanding (`busy`);
//! * no master known: Discovery to the node's addresses in turn, starting
//!   at the one after the last that answered; a master answers "it is me",
//!   a standby names the master it believes in (or none: try the next);
//!   after the last address, "no master found";
//! * the call goes to the master; a standby's answer is a redirect, followed
//!   while it names another address (at most `addresses + 3` hops);
//! * a failed RPC (deadline, refused connection) forgets that address's
//!   connection and, if it was the master, the master; the call fails and
//!   the caller backs off;
//! * the first RPC on a new connection costs one more round trip (the
//!   connect);
//! * every RPC of a call, Discovery included, has the call's deadline
//!   (`doorman_core::schedule::deadline_for` of the leases it renews), and
//!   the grants count from when the call began (`Answer::sent_at`).
//!
//! Must not: decide anything about leases, or touch the clock or the
//! generator (the engine times every step).

use doorman_core::server::{CapacityRequest, Grant};
use doorman_lease::{Span, Time};

/// What an RPC carries to a server task.
#[derive(Debug)]
pub enum RpcMsg {
    /// Discovery: who is the master?
    Discovery,
    /// GetCapacity or GetServerCapacity.
    Capacity(CapacityRequest),
}

/// What comes back to the caller.
#[derive(Debug)]
pub enum Reply {
    /// Discovery's answer: is this task the master, and which task the
    /// answering task believes is.
    Discovery {
        /// The answering task is the master.
        is_master: bool,
        /// The master it names, if it knows one.
        master: Option<usize>,
    },
    /// The master's grants.
    Grants(Vec<Grant>),
    /// "Not the master": the master this task believes in, if any.
    Redirect(Option<usize>),
    /// No answer: the deadline passed or the connection was refused.
    Failed,
}

/// What the engine must do next for a link.
#[derive(Debug)]
pub enum Step {
    /// Send `msg` to task `task` of the node.
    Send(usize, RpcMsg),
    /// The call is over: the resources it asked for and its answer, or
    /// `Err` (no master, an RPC failed, too many redirects).
    Done(Vec<String>, Result<Answer, ()>),
}

/// A call's grants, and when the call began (the caller's leases count
/// from there, as `doorman_lease::Lease::received` has them).
#[derive(Debug)]
pub struct Answer {
    /// When the call began.
    pub sent_at: Time,
    /// The master's grants.
    pub grants: Vec<Grant>,
}

/// The call in progress.
#[derive(Debug)]
struct Call {
    ids: Vec<String>,
    req: CapacityRequest,
    sent_at: Time,
    deadline: Span,
    hops: usize,
    /// Position in the Discovery round, while discovering.
    discovering: Option<usize>,
}

/// One caller's connection to one node (a job of `tasks` addresses).
#[derive(Debug)]
pub struct Link {
    tasks: usize,
    next: usize,
    master: Option<usize>,
    /// Bit `t`: a connection to task `t` is open.
    channels: u64,
    /// Bumped when the calling process is replaced; answers to an older
    /// epoch are dropped.
    epoch: u64,
    call: Option<Box<Call>>,
}

impl Link {
    /// A link to a node of `tasks` tasks (at most 64), nothing known yet.
    pub fn new(tasks: usize) -> Self {
        Link {
            tasks: tasks.clamp(1, 64),
            next: 0,
            master: None,
            channels: 0,
            epoch: 0,
            call: None,
        }
    }

    /// A call is outstanding.
    pub fn busy(&self) -> bool {
        self.call.is_some()
    }

    /// The master the last call reached, if known.
    pub fn master(&self) -> Option<usize> {
        self.master
    }

    /// The epoch answers must carry.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The calling process was replaced: a new connector, nothing known,
    /// any outstanding call abandoned.
    pub fn reset(&mut self) {
        *self = Link {
            epoch: self.epoch + 1,
            ..Link::new(self.tasks)
        };
    }

    /// True if sending to `task` needs a new connection first (and opens it).
    pub fn connect(&mut self, task: usize) -> bool {
        let bit = 1u64 << (task % 64);
        let new = self.channels & bit == 0;
        self.channels |= bit;
        new
    }

    fn forget(&mut self, task: usize) {
        self.channels &= !(1u64 << (task % 64));
        if self.master == Some(task) {
            self.master = None;
        }
    }

    /// The deadline of the call in progress' RPCs.
    pub fn deadline(&self) -> Option<Span> {
        self.call.as_ref().map(|c| c.deadline)
    }

    /// Starts a call for `ids` with `req` at `sent_at`, each of its RPCs
    /// with `deadline`.
    pub fn start(
        &mut self,
        ids: Vec<String>,
        req: CapacityRequest,
        (sent_at, deadline): (Time, Span),
    ) -> Step {
        self.call = Some(Box::new(Call {
            ids,
            req,
            sent_at,
            deadline,
            hops: 0,
            discovering: None,
        }));
        self.step()
    }

    /// One turn of `Connector::call`'s loop: to the master, or discover it.
    fn step(&mut self) -> Step {
        let max_hops = self.tasks + 3;
        let Some(call) = self.call.as_mut() else {
            return Step::Done(Vec::new(), Err(()));
        };
        if call.hops >= max_hops {
            return self.finish(Err(()));
        }
        call.hops += 1;
        match self.master {
            Some(t) => Step::Send(t, RpcMsg::Capacity(call.req.clone())),
            None => {
                call.discovering = Some(0);
                self.discover()
            }
        }
    }

    /// The next Discovery of the round, or "no master found".
    fn discover(&mut self) -> Step {
        let i = self.call.as_ref().and_then(|c| c.discovering).unwrap_or(0);
        if i >= self.tasks {
            self.next = (self.next + 1) % self.tasks;
            return self.finish(Err(()));
        }
        Step::Send((self.next + i) % self.tasks, RpcMsg::Discovery)
    }

    fn finish(&mut self, r: Result<Vec<Grant>, ()>) -> Step {
        let Some(call) = self.call.take() else {
            return Step::Done(Vec::new(), Err(()));
        };
        let sent_at = call.sent_at;
        Step::Done(call.ids, r.map(|grants| Answer { sent_at, grants }))
    }

    /// Task `task` answered (or did not); what to do next.
    pub fn on_reply(&mut self, task: usize, reply: Reply) -> Step {
        let Some(call) = self.call.as_mut() else {
            return Step::Done(Vec::new(), Err(()));
        };
        let discovering = call.discovering;
        match (discovering, reply) {
            (Some(i), Reply::Failed) => {
                self.forget(task);
                self.advance(i)
            }
            (Some(i), Reply::Discovery { is_master, master }) => {
                let (found, next) = if is_master {
                    (Some(task), self.next + i)
                } else {
                    (master, self.next + i + 1)
                };
                match found {
                    Some(m) => {
                        self.next = next % self.tasks;
                        self.master = Some(m);
                        call.discovering = None;
                        Step::Send(m, RpcMsg::Capacity(call.req.clone()))
                    }
                    None => self.advance(i),
                }
            }
            (_, Reply::Failed) => {
                self.forget(task);
                self.finish(Err(()))
            }
            (_, Reply::Grants(g)) => self.finish(Ok(g)),
            (_, Reply::Redirect(Some(m))) if m != task => {
                self.master = Some(m);
                self.step()
            }
            (_, Reply::Redirect(_)) => {
                self.master = None;
                self.finish(Err(()))
            }
            (None, Reply::Discovery { .. }) => self.finish(Err(())),
        }
    }

    /// The Discovery at position `i` gave nothing: the next address.
    fn advance(&mut self, i: usize) -> Step {
        if let Some(c) = self.call.as_mut() {
            c.discovering = Some(i + 1);
        }
        self.discover()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use doorman_core::server::Who;

    const AT: (Time, Span) = (Time::ZERO, Span::secs(5));

    fn req() -> CapacityRequest {
        CapacityRequest {
            who: Who::Client("c".into()),
            resources: Vec::new(),
        }
    }

    #[test]
    fn discovers_follows_the_named_master_then_calls_it() {
        let mut l = Link::new(3);
        assert!(matches!(
            l.start(vec![], req(), AT),
            Step::Send(0, RpcMsg::Discovery)
        ));
        let s = l.on_reply(
            0,
            Reply::Discovery {
                is_master: false,
                master: Some(2),
            },
        );
        assert!(matches!(s, Step::Send(2, RpcMsg::Capacity(_))));
        assert!(matches!(
            l.on_reply(2, Reply::Grants(vec![])),
            Step::Done(_, Ok(_))
        ));
        assert!(!l.busy());
        // The master is remembered: the next call goes straight to it.
        assert!(matches!(
            l.start(vec![], req(), AT),
            Step::Send(2, RpcMsg::Capacity(_))
        ));
    }

    #[test]
    fn a_call_keeps_its_deadline_and_its_grants_count_from_its_start() {
        let mut l = Link::new(2);
        l.master = Some(0);
        assert_eq!(l.deadline(), None);
        let at = (Time::from_secs(7), Span::secs(4));
        assert!(matches!(l.start(vec![], req(), at), Step::Send(0, _)));
        assert_eq!(l.deadline(), Some(Span::secs(4)));
        // A redirect, then the grants: still the call that began at 7 s.
        assert!(matches!(
            l.on_reply(0, Reply::Redirect(Some(1))),
            Step::Send(1, _)
        ));
        match l.on_reply(1, Reply::Grants(vec![])) {
            Step::Done(_, Ok(a)) => assert_eq!(a.sent_at, Time::from_secs(7)),
            other => panic!("{other:?}"),
        }
        assert_eq!(l.deadline(), None);
    }

    #[test]
    fn a_failure_forgets_the_master_and_the_round_moves_on() {
        let mut l = Link::new(3);
        l.master = Some(1);
        assert!(matches!(l.start(vec![], req(), AT), Step::Send(1, _)));
        assert!(matches!(
            l.on_reply(1, Reply::Failed),
            Step::Done(_, Err(()))
        ));
        assert_eq!(l.master, None);
        // Discovery: 0 knows no master, 1 fails, 2 fails: no master found.
        assert!(matches!(
            l.start(vec![], req(), AT),
            Step::Send(0, RpcMsg::Discovery)
        ));
        let none = Reply::Discovery {
            is_master: false,
            master: None,
        };
        assert!(matches!(
            l.on_reply(0, none),
            Step::Send(1, RpcMsg::Discovery)
        ));
        assert!(matches!(
            l.on_reply(1, Reply::Failed),
            Step::Send(2, RpcMsg::Discovery)
        ));
        assert!(matches!(
            l.on_reply(2, Reply::Failed),
            Step::Done(_, Err(()))
        ));
        // The next round starts one address further on.
        assert!(matches!(
            l.start(vec![], req(), AT),
            Step::Send(1, RpcMsg::Discovery)
        ));
    }

    #[test]
    fn redirects_are_followed_a_bounded_number_of_times() {
        let mut l = Link::new(2);
        l.master = Some(0);
        let mut s = l.start(vec![], req(), AT);
        let mut sends = 0;
        while let Step::Send(t, _) = s {
            sends += 1;
            s = l.on_reply(t, Reply::Redirect(Some(1 - t)));
        }
        assert_eq!(sends, 5, "addresses + 3 hops");
        assert!(matches!(s, Step::Done(_, Err(()))));
    }
}
