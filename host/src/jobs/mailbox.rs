//! A job's mailbox: the messages sent to its agent while it runs (delivered at its
//! next turn boundary, in the order sent), the interrupts that cut its current step,
//! what it finished without reading, and the receipts of the messages it sent.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::SystemTime;

use tokio::sync::watch;

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

/// Receipts that may wait for a sender's next turn.
pub(crate) const MAX_RECEIPTS: usize = 256;

/// What a job's agent has not read yet, and what it learned of its own messages.
#[derive(Debug)]
pub(crate) struct Mailbox {
    /// Letters waiting, oldest first; `None` once the agent ended (what was left is
    /// in `undelivered`).
    letters: Mutex<Option<VecDeque<Letter>>>,
    /// Letters the agent ended without reading.
    undelivered: Mutex<Vec<Letter>>,
    /// Counts interrupts: the agent watches it while it waits for its model or tools.
    interrupts: watch::Sender<u64>,
    /// Receipts of the messages this job's agent sent, for its next turn.
    receipts: Mutex<Vec<String>>,
}

impl Default for Mailbox {
    fn default() -> Self {
        Mailbox {
            letters: Mutex::new(Some(VecDeque::new())),
            undelivered: Mutex::default(),
            interrupts: watch::channel(0).0,
            receipts: Mutex::default(),
        }
    }
}

impl Mailbox {
    /// Leaves `letter` for the agent (and cuts its current step, for an interrupt),
    /// unless `most` letters wait already. `Ok`: how many letters wait before it.
    /// `Err`: why it was refused (the agent ended, or too many wait).
    pub(crate) fn post(&self, letter: Letter, most: usize) -> Result<usize, String> {
        self.accepts(most)?;
        let mut letters = lock(&self.letters);
        let Some(waiting) = letters.as_mut() else {
            return Err("it has finished: a message can no longer reach it".into());
        };
        let behind = waiting.len();
        let interrupt = letter.mode == MessageMode::Interrupt;
        waiting.push_back(letter);
        drop(letters);
        if interrupt {
            self.interrupts.send_modify(|count| *count += 1);
        }
        Ok(behind)
    }

    /// The letters that may go in turn `turn`'s request, taken now, oldest first.
    pub(crate) fn take(&self, turn: u32) -> Vec<Letter> {
        let mut letters = lock(&self.letters);
        let Some(waiting) = letters.as_mut() else {
            return Vec::new();
        };
        let (due, later): (VecDeque<Letter>, VecDeque<Letter>) =
            waiting.drain(..).partition(|letter| letter.due <= turn);
        *waiting = later;
        due.into()
    }

    /// Whether a letter can be left now (the agent has not ended and fewer than
    /// `most` wait).
    pub(crate) fn accepts(&self, most: usize) -> Result<(), String> {
        match lock(&self.letters).as_ref() {
            None => Err("it has finished: a message can no longer reach it".into()),
            Some(waiting) if waiting.len() >= most => Err(format!(
                "{} messages already wait for it unread (at most {most} may: [defaults] max_queued_messages)",
                waiting.len()
            )),
            Some(_) => Ok(()),
        }
    }

    /// A watch that changes at each interrupt posted from now on.
    pub(crate) fn interrupts(&self) -> watch::Receiver<u64> {
        self.interrupts.subscribe()
    }

    /// The agent ended: no letter is accepted any more, and those left unread are
    /// kept as undelivered. Returns them.
    pub(crate) fn close(&self) -> Vec<Letter> {
        let left: Vec<Letter> = lock(&self.letters)
            .take()
            .map(Vec::from)
            .unwrap_or_default();
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
    pub(crate) fn receipt(&self, text: String) {
        let mut receipts = lock(&self.receipts);
        if receipts.len() >= MAX_RECEIPTS {
            receipts.remove(0);
        }
        receipts.push(text);
    }

    /// The receipts left for this job's agent, taken now.
    pub(crate) fn take_receipts(&self) -> Vec<String> {
        std::mem::take(&mut *lock(&self.receipts))
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

    #[test]
    fn letters_wait_in_order_interrupts_are_counted_and_a_closed_box_keeps_what_was_unread() {
        let mailbox = Mailbox::default();
        let mut interrupts = mailbox.interrupts();
        assert_eq!(mailbox.post(letter(1, MessageMode::Queue), 32), Ok(0));
        assert!(!interrupts.has_changed().unwrap());
        assert_eq!(mailbox.post(letter(2, MessageMode::Interrupt), 32), Ok(1));
        assert!(interrupts.has_changed().unwrap());
        interrupts.borrow_and_update();
        let taken: Vec<u64> = mailbox.take(1).iter().map(|l| l.seq).collect();
        assert_eq!(taken, [1, 2]);
        assert!(mailbox.take(1).is_empty());
        for seq in 3..7 {
            mailbox.post(letter(seq, MessageMode::Queue), 4).unwrap();
        }
        let full = mailbox.post(letter(99, MessageMode::Queue), 4).unwrap_err();
        assert!(full.contains("max_queued_messages"), "{full}");
        assert_eq!(mailbox.close().len(), 4);
        assert_eq!(mailbox.undelivered().len(), 4);
        let ended = mailbox
            .post(letter(100, MessageMode::Queue), 4)
            .unwrap_err();
        assert!(ended.contains("finished"), "{ended}");
        assert!(mailbox.take(9).is_empty());
    }

    #[test]
    fn receipts_nobody_takes_are_bounded() {
        let mailbox = Mailbox::default();
        for n in 0..MAX_RECEIPTS + 10 {
            mailbox.receipt(format!("receipt {n}"));
        }
        let kept = mailbox.take_receipts();
        assert_eq!(kept.len(), MAX_RECEIPTS);
        assert_eq!(kept[0], "receipt 10");
        assert!(mailbox.take_receipts().is_empty());
    }
}
