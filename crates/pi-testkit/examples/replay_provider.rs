//! `replay_provider CASE.json`: print the normalized trace of one provider replay case.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: replay_provider CASE.json");
        std::process::exit(2);
    };
    match pi_testkit::provider_replay::replay_case_blocking(std::path::Path::new(&path)) {
        Ok(trace) => print!("{trace}"),
        Err(error) => {
            eprintln!("replay: {error}");
            std::process::exit(1);
        }
    }
}
