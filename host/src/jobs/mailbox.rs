//! A job's mailbox: the messages sent to its agent while it runs (delivered at its
//! next turn boundary, in the order sent), the interrupts that cut its current step,
//! what it finished without reading, and the receipts of the messages it sent.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

use tokio::sync::{watch, Notify};

pub(crate) use crate::events::MessageMode;

/// One message, as sent.
#[derive(Clone, Debug)]
pub(crate) struct Letter {
    /// Its number in the run (1, 2, …).
    pub seq: u64,
    /// Who sent it: the sending agent's path, or a person.
    pub from: String,
    /// The sender's job id, when an agent sent it (its receipt goes there).
    pub sender: Option<String>,
    /// When it was sent.
    pub sent: SystemTime,
    /// Its text.
    pub text: String,
    /// How it is delivered.
    pub mode: MessageMode,
    /// The first turn whose request may carry it (0: the next): a resumed agent gets
    /// each message it had read in the turn it read it.
    pub due: u32,
}

impl Letter {
    /// A letter as a run's journal recorded it, first readable in turn `due` (0: the
    /// next).
    pub(crate) fn recorded(letter: &crate::journal::resume::RecordedLetter, due: u32) -> Letter {
        Letter {
            seq: letter.seq,
            from: letter.from.clone(),
            sender: letter.sender.clone(),
            sent: SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(letter.sent_ms),
            text: letter.text.clone(),
            mode: letter.mode,
            due,
        }
    }

    /// The receipt its sender is given once agent `to` read it in turn `turn`: the
    /// same words in a replay (no clock in it).
    pub(crate) fn receipt(&self, to: &str, turn: u32) -> String {
        format!(
            "Your message #{} to {to} ({}) was delivered: it is in the request of its turn {turn}.",
            self.seq,
            self.mode.as_str()
        )
    }
}

/// Receipts that may wait for a sender's next turn.
pub(crate) const MAX_RECEIPTS: usize = 256;

/// Whether a mailbox takes letters.
#[derive(Debug)]
enum Door {
    /// The agent runs: letters wait here, oldest first.
    Open(VecDeque<Letter>),
    /// The agent finished and may be resumed: only a follow-up gets in, and wakes it.
    Resting,
    /// The agent ended for good.
    Closed,
}

/// How a letter got in.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Posted {
    /// It waits behind this many letters.
    Waiting(usize),
    /// It woke the resting agent, which resumes with its history to read it.
    Woke,
}

/// What a job's agent has not read yet, and what it learned of its own messages.
#[derive(Debug)]
pub(crate) struct Mailbox {
    /// Letters waiting, or why none can.
    door: Mutex<Door>,
    /// Letters the agent ended without reading.
    undelivered: Mutex<Vec<Letter>>,
    /// Counts interrupts: the agent watches it while it waits for its model or tools.
    interrupts: watch::Sender<u64>,
    /// Wakes the resting agent: a follow-up came in.
    wake: Notify,
    /// Told of each letter left: a job run on a worker forwards its letters there.
    posted: Notify,
    /// Also told of each letter left, once set: the remote child whose worker runs
    /// this agent (a mirrored descendant) forwards its letters there.
    relay: std::sync::OnceLock<std::sync::Arc<Notify>>,
    /// Follow-ups accepted.
    follow_ups: Mutex<usize>,
    /// Receipts of the messages this job's agent sent (by number), for its next turn.
    receipts: Mutex<Vec<(u64, String)>>,
    /// Told of each receipt left.
    receipt_left: Notify,
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox {
            door: Mutex::new(Door::Open(VecDeque::new())),
            undelivered: Mutex::default(),
            interrupts: watch::channel(0).0,
            wake: Notify::new(),
            posted: Notify::new(),
            relay: std::sync::OnceLock::new(),
            follow_ups: Mutex::default(),
            receipts: Mutex::default(),
            receipt_left: Notify::new(),
        }
    }
}

/// What a mailbox may hold: letters waiting at once, and follow-ups in the agent's life.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Room {
    /// Letters that may wait unread (`[defaults] max_queued_messages`).
    pub(crate) queued: usize,
    /// Follow-ups the agent may take (`[defaults] max_follow_ups`).
    pub(crate) follow_ups: usize,
}

impl Room {
    /// No bound: for letters accepted before (a resumed run's).
    pub(crate) const UNBOUNDED: Room = Room {
        queued: usize::MAX,
        follow_ups: usize::MAX,
    };
}

impl Mailbox {
    /// Leaves `letter` for the agent (and cuts its current step, for an interrupt),
    /// unless the mailbox has no room for it; a follow-up to a resting agent wakes it,
    /// `woke` having run first (under the mailbox's lock: the agent cannot end for
    /// good in between). `Err`: why it was refused.
    pub(crate) fn post(
        &self,
        letter: Letter,
        room: Room,
        woke: impl FnOnce(),
    ) -> Result<Posted, String> {
        let mut door = lock(&self.door);
        check(&door, letter.mode, room, *lock(&self.follow_ups))?;
        let mode = letter.mode;
        if mode == MessageMode::FollowUp {
            *lock(&self.follow_ups) += 1;
        }
        let posted = match &mut *door {
            Door::Open(waiting) => {
                let behind = waiting.len();
                waiting.push_back(letter);
                self.posted.notify_one();
                if let Some(relay) = self.relay.get() {
                    relay.notify_one();
                }
                Posted::Waiting(behind)
            }
            Door::Resting => {
                *door = Door::Open(VecDeque::from([letter]));
                woke();
                self.wake.notify_one();
                Posted::Woke
            }
            Door::Closed => unreachable!("checked above"),
        };
        drop(door);
        if mode == MessageMode::Interrupt {
            self.interrupts.send_modify(|count| *count += 1);
        }
        Ok(posted)
    }

    /// Whether a letter of `mode` can be left now.
    pub(crate) fn accepts(&self, mode: MessageMode, room: Room) -> Result<(), String> {
        check(&lock(&self.door), mode, room, *lock(&self.follow_ups))
    }

    /// The letters that may go in turn `turn`'s request, taken now, oldest first.
    pub(crate) fn take(&self, turn: u32) -> Vec<Letter> {
        let mut door = lock(&self.door);
        let Door::Open(waiting) = &mut *door else {
            return Vec::new();
        };
        let (due, later): (VecDeque<Letter>, VecDeque<Letter>) =
            waiting.drain(..).partition(|letter| letter.due <= turn);
        *waiting = later;
        due.into()
    }

    /// Whether a follow-up waits for turn `turn` (or earlier): the agent may not
    /// finish before it reads it.
    pub(crate) fn has_follow_up(&self, turn: u32) -> bool {
        match &*lock(&self.door) {
            Door::Open(waiting) => waiting
                .iter()
                .any(|letter| letter.mode == MessageMode::FollowUp && letter.due <= turn),
            Door::Resting | Door::Closed => false,
        }
    }

    /// Follow-ups accepted so far.
    pub(crate) fn follow_ups(&self) -> usize {
        *lock(&self.follow_ups)
    }

    /// A watch that changes at each interrupt posted from now on.
    pub(crate) fn interrupts(&self) -> watch::Receiver<u64> {
        self.interrupts.subscribe()
    }

    /// The agent finished but may be resumed: what it left unread is undelivered,
    /// and from now on only a follow-up gets in. Returns what was left unread.
    pub(crate) fn rest(&self) -> Vec<Letter> {
        self.shut(Door::Resting)
    }

    /// From now on `relay` is told of each letter left: this agent runs on a worker,
    /// under a remote child that forwards its letters there.
    pub(crate) fn relay_to(&self, relay: std::sync::Arc<Notify>) {
        let _ = self.relay.set(relay);
    }

    /// Waits until a letter is left (for a job whose agent runs elsewhere).
    pub(crate) async fn posted(&self) {
        self.posted.notified().await;
    }

    /// Waits until a follow-up wakes the resting agent.
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// The agent ended for good: no letter is accepted any more, and those left unread
    /// are kept as undelivered. Returns them.
    pub(crate) fn close(&self) -> Vec<Letter> {
        self.shut(Door::Closed)
    }

    fn shut(&self, to: Door) -> Vec<Letter> {
        let left = match std::mem::replace(&mut *lock(&self.door), to) {
            Door::Open(waiting) => Vec::from(waiting),
            Door::Resting | Door::Closed => Vec::new(),
        };
        lock(&self.undelivered).extend(left.iter().cloned());
        left
    }

    /// The letters the agent ended without reading.
    pub(crate) fn undelivered(&self) -> Vec<Letter> {
        lock(&self.undelivered).clone()
    }

    /// Leaves a receipt for this job's agent (of a message it sent). At most
    /// [`MAX_RECEIPTS`] wait: a sender that never takes them (an MCP session's root
    /// has no turns) keeps the newest.
    pub(crate) fn receipt(&self, seq: u64, text: String) {
        let mut receipts = lock(&self.receipts);
        if receipts.len() >= MAX_RECEIPTS {
            receipts.remove(0);
        }
        receipts.push((seq, text));
        drop(receipts);
        self.receipt_left.notify_waiters();
    }

    /// The receipts left for this job's agent, taken now.
    pub(crate) fn take_receipts(&self) -> Vec<(u64, String)> {
        std::mem::take(&mut *lock(&self.receipts))
    }

    /// The receipts of messages `seqs`, taken once all are here (a replay gives an
    /// agent the receipts its recording had at that turn), or after `within` those
    /// that came; the others stay.
    pub(crate) async fn take_receipts_of(
        &self,
        seqs: &[u64],
        within: std::time::Duration,
    ) -> Vec<(u64, String)> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let left = self.receipt_left.notified();
            {
                let mut receipts = lock(&self.receipts);
                let all = seqs
                    .iter()
                    .all(|seq| receipts.iter().any(|(s, _)| s == seq));
                if all || tokio::time::Instant::now() >= deadline {
                    let (taken, kept) = std::mem::take(&mut *receipts)
                        .into_iter()
                        .partition(|(seq, _)| seqs.contains(seq));
                    *receipts = kept;
                    return taken;
                }
            }
            let _ = tokio::time::timeout_at(deadline, left).await;
        }
    }
}

/// Whether a letter of `mode` gets through `door`, given `room` and the follow-ups
/// taken so far.
fn check(door: &Door, mode: MessageMode, room: Room, follow_ups: usize) -> Result<(), String> {
    if mode == MessageMode::FollowUp && follow_ups >= room.follow_ups {
        return Err(format!(
            "it has taken {follow_ups} follow-ups already (at most {} may wake one agent: [defaults] max_follow_ups)",
            room.follow_ups
        ));
    }
    match door {
        Door::Closed => Err("it has ended: a message can no longer reach it".into()),
        Door::Resting if mode != MessageMode::FollowUp => Err(format!(
            "it has finished: a {} message reaches only a running agent (send mode \"follow_up\" to resume it with its history)",
            mode.as_str()
        )),
        Door::Resting => Ok(()),
        Door::Open(waiting) if waiting.len() >= room.queued => Err(format!(
            "{} messages already wait for it unread (at most {} may: [defaults] max_queued_messages)",
            waiting.len(),
            room.queued
        )),
        Door::Open(_) => Ok(()),
    }
}

/// `mutex` locked, whatever a panicking holder left.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn letter(seq: u64, mode: MessageMode) -> Letter {
        Letter {
            seq,
            from: "main[root]".into(),
            sender: None,
            sent: SystemTime::now(),
            text: format!("message {seq}"),
            mode,
            due: 0,
        }
    }

    fn room(queued: usize, follow_ups: usize) -> Room {
        Room { queued, follow_ups }
    }

    #[test]
    fn letters_wait_in_order_interrupts_are_counted_and_a_closed_box_keeps_what_was_unread() {
        let mailbox = Mailbox::default();
        let mut interrupts = mailbox.interrupts();
        let post = |seq, mode, queued| mailbox.post(letter(seq, mode), room(queued, 8), || {});
        assert_eq!(post(1, MessageMode::Queue, 32), Ok(Posted::Waiting(0)));
        assert!(!interrupts.has_changed().unwrap());
        assert_eq!(post(2, MessageMode::Interrupt, 32), Ok(Posted::Waiting(1)));
        assert!(interrupts.has_changed().unwrap());
        interrupts.borrow_and_update();
        let taken: Vec<u64> = mailbox.take(1).iter().map(|l| l.seq).collect();
        assert_eq!(taken, [1, 2]);
        assert!(mailbox.take(1).is_empty());
        for seq in 3..7 {
            post(seq, MessageMode::Queue, 4).unwrap();
        }
        let full = post(99, MessageMode::Queue, 4).unwrap_err();
        assert!(full.contains("max_queued_messages"), "{full}");
        assert_eq!(mailbox.close().len(), 4);
        assert_eq!(mailbox.undelivered().len(), 4);
        let ended = post(100, MessageMode::FollowUp, 4).unwrap_err();
        assert!(ended.contains("ended"), "{ended}");
        assert!(mailbox.take(9).is_empty());
    }

    #[test]
    fn a_resting_agent_takes_only_follow_ups_each_waking_it_up_to_the_limit() {
        let mailbox = Mailbox::default();
        let woke = std::cell::Cell::new(0);
        let post =
            |seq, mode| mailbox.post(letter(seq, mode), room(32, 2), || woke.set(woke.get() + 1));
        post(1, MessageMode::Queue).unwrap();
        assert_eq!(mailbox.rest().len(), 1, "unread when it finished");
        let queued = post(2, MessageMode::Queue).unwrap_err();
        assert!(queued.contains("follow_up"), "{queued}");
        assert!(post(3, MessageMode::Interrupt).is_err());
        assert_eq!(post(4, MessageMode::FollowUp), Ok(Posted::Woke));
        assert_eq!(woke.get(), 1);
        assert!(mailbox.has_follow_up(1));
        assert_eq!(post(5, MessageMode::FollowUp), Ok(Posted::Waiting(1)));
        assert_eq!(woke.get(), 1, "it was awake already");
        let taken: Vec<u64> = mailbox.take(1).iter().map(|l| l.seq).collect();
        assert_eq!(taken, [4, 5]);
        assert!(!mailbox.has_follow_up(9));
        mailbox.rest();
        let over = post(6, MessageMode::FollowUp).unwrap_err();
        assert!(over.contains("max_follow_ups"), "{over}");
        assert_eq!(woke.get(), 1);
    }

    #[test]
    fn receipts_nobody_takes_are_bounded() {
        let mailbox = Mailbox::default();
        for n in 0..MAX_RECEIPTS + 10 {
            mailbox.receipt(n as u64, format!("receipt {n}"));
        }
        let kept = mailbox.take_receipts();
        assert_eq!(kept.len(), MAX_RECEIPTS);
        assert_eq!(kept[0].1, "receipt 10");
        assert!(mailbox.take_receipts().is_empty());
    }
}
