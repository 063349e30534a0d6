//! The `foster-init` binary: `foster init` alone, small enough to add to every image.
//!
//! Its command line is [`foster::init::args`] (no clap); then it runs the same code as
//! `foster init`. The rest of the library is left out by the linker, as nothing here reaches it.

use std::process::ExitCode;

fn main() -> ExitCode {
    // As `foster` does first: a `kill -32` or `-33` from outside must not end the init.
    foster::process::signal::ignore_reserved();
    let env = |name: &str| std::env::var(name).ok();
    match foster::init::args::parse(std::env::args_os().skip(1), &env) {
        Ok(foster::init::args::Parsed::Run(opts)) => ExitCode::from(foster::init::run(&opts) as u8),
        Ok(foster::init::args::Parsed::Help) => {
            print!("{}", foster::init::args::HELP);
            ExitCode::SUCCESS
        }
        Ok(foster::init::args::Parsed::Version) => {
            let commit = env!("FOSTER_COMMIT");
            println!("foster-init {} ({commit})", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            foster::base::logging::report(format_args!(
                "{e}\n\nUsage: foster-init [OPTIONS] [--] PROGRAM [ARGS]...\n\n\
                 For more information, try '--help'."
            ));
            ExitCode::from(2)
        }
    }
}
