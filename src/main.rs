//! The web app's entry point: `trunk serve` builds this for wasm32 and mounts the UI.

#[cfg(target_arch = "wasm32")]
fn main() {
    headlab::ui::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("headlab is a browser app: run `scripts/serve.sh` and open the printed address.");
    eprintln!("Natively, `cargo test` runs the test suite and `cargo bench --bench mha` the benchmark.");
    std::process::exit(2);
}
