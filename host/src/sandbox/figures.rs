//! What one tool call used, as the sandbox measured it: the fuel its guest burned and
//! the size of what it returned. They travel with the call's result to the agent,
//! which puts them on the call's `tool_call_finished` event and `tool_finished`
//! journal record (its wall time is measured there, around the whole call).

use serde::{Deserialize, Serialize};

use super::error::ToolCallError;

/// What one call used. Its serde form is the fields of a call's `tool_call_finished`
/// event and `tool_finished` journal record (flattened into both); a field absent
/// there (journals written before it was recorded) reads as `None` or 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CallFigures {
    /// Fuel the guest burned, of its `capabilities.fuel` (all of it when it ran out):
    /// how much of its compute budget the call took. `None` when no guest ran: a
    /// host-side tool (the spawn tools) or a call refused before its store was made
    /// (an unknown tool, arguments that are not a JSON object). Never a made-up 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fuel_used: Option<u64>,
    /// Bytes of the result, or of the error message, the call returned: what it
    /// adds to the model's context.
    pub output_bytes: u64,
    /// The most linear memory the guest held at once, in bytes, of its
    /// `capabilities.memory_mb`; `None` when no guest ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_peak_bytes: Option<u64>,
}

impl CallFigures {
    /// The figures of a call that returned `text`, its guest having burned
    /// `fuel_used` (`None`: no guest ran).
    pub fn of(text: &str, fuel_used: Option<u64>) -> CallFigures {
        CallFigures {
            fuel_used,
            output_bytes: text.len() as u64,
            memory_peak_bytes: None,
        }
    }
}

/// A call's result with what it used.
#[derive(Debug)]
pub struct Measured {
    /// The result, or why there is none.
    pub result: Result<String, ToolCallError>,
    /// What the call used.
    pub figures: CallFigures,
}

impl Measured {
    /// `result`, of a call whose guest burned `fuel_used` (`None`: no guest ran); its
    /// output counted in bytes (an error by its message).
    pub fn new(result: Result<String, ToolCallError>, fuel_used: Option<u64>) -> Measured {
        let figures = match &result {
            Ok(text) => CallFigures::of(text, fuel_used),
            Err(error) => CallFigures::of(&error.to_string(), fuel_used),
        };
        Measured { result, figures }
    }

    /// These figures with the guest's memory peak, `bytes`.
    pub fn with_memory_peak(mut self, bytes: u64) -> Measured {
        self.figures.memory_peak_bytes = Some(bytes);
        self
    }

    /// A call refused before any guest ran.
    pub fn refused(error: ToolCallError) -> Measured {
        Measured::new(Err(error), None)
    }
}
