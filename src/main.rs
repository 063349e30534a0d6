//! The `foster` binary: everything lives in the library; see `foster --help`.

fn main() -> std::process::ExitCode {
    foster::cli::main()
}
