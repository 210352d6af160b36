//! [`Tree::happened`]: the one call that tells a run's [`Fact`] to both of its
//! listeners, the journal (its record) and the event bus (its event).

use super::tree::Tree;
use crate::events::Event;
use crate::journal::{Fact, Journaling};

impl Tree {
    /// `fact` happened: its record is journaled (as [`Tree::record`] does), then its
    /// event published, both made from the one value.
    pub(crate) fn happened(&self, fact: Fact<'_>) {
        let event = fact.event();
        self.record(|| fact.into_record());
        self.publish(event);
    }

    /// [`Tree::happened`], its record journaled as `journaling` says, waited for.
    pub(crate) async fn happened_as(&self, fact: Fact<'_>, journaling: Journaling) {
        let event = fact.event();
        let record = || fact.into_record();
        match journaling {
            Journaling::Not => {}
            Journaling::Queued => self.record(record),
            Journaling::Written => self.record_written(record).await,
            Journaling::Durably => self.record_durably(record).await,
        }
        self.publish(event);
    }

    /// Publishes `event`, if there is one.
    fn publish(&self, event: Option<Event>) {
        if let Some(event) = event {
            self.events.publish(event);
        }
    }
}
