fn main() -> std::process::ExitCode {
    osds::cli::main()
}
