//! The `warren` binary: parse arguments, set up logging, run, print the error chain.

use std::process::ExitCode;

fn main() -> ExitCode {
    warren::cli_main()
}
