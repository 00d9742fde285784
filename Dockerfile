# Vigil's container image: built in a Rust stage, run from a distroless non-root base.
# docker build --build-arg VIGIL_GIT_COMMIT=$(git rev-parse --short=12 HEAD) -t vigil:0.1.0 .
# then   vigil manifests --image vigil:0.1.0 | kubectl apply -f -   (or the chart in charts/vigil)

FROM rust:1.95-bookworm AS build
WORKDIR /src

# Dependencies in a layer of their own: the manifests and empty crates compile every dependency,
# and this layer is reused until Cargo.toml or Cargo.lock change, whatever the source edits.
# One line per crate (COPY cannot keep directories from a glob); a test in
# crates/vigil/tests/packaging.rs fails when a crate is missing here.
COPY Cargo.toml Cargo.lock ./
# Patched copies of crates.io packages that Cargo.toml's [patch.crates-io] points at.
COPY vendor ./vendor
COPY crates/apis/Cargo.toml crates/apis/
COPY crates/bench/Cargo.toml crates/bench/
COPY crates/conformance/Cargo.toml crates/conformance/
COPY crates/controllers/Cargo.toml crates/controllers/
COPY crates/fuzz/Cargo.toml crates/fuzz/
COPY crates/kafka/Cargo.toml crates/kafka/
COPY crates/kubelet/Cargo.toml crates/kubelet/
COPY crates/provider/Cargo.toml crates/provider/
COPY crates/provider-reference/Cargo.toml crates/provider-reference/
COPY crates/runtime/Cargo.toml crates/runtime/
COPY crates/sandbox/Cargo.toml crates/sandbox/
COPY crates/testenv/Cargo.toml crates/testenv/
COPY crates/vault/Cargo.toml crates/vault/
COPY crates/vigil/Cargo.toml crates/vigil/
COPY crates/workspace-hack/Cargo.toml crates/workspace-hack/
RUN for crate in crates/*/; do mkdir -p "$crate/src" && touch "$crate/src/lib.rs"; done \
 && rm crates/vigil/src/lib.rs && echo 'fn main() {}' > crates/vigil/src/main.rs \
 && cargo build --release --locked -p vigil \
 && rm -rf crates/*/src target/release/vigil* target/release/deps/vigil* \
      target/release/.fingerprint/vigil* target/release/build/vigil-*

# The sources. Their modification times may predate the stub build's: touch them so Cargo
# rebuilds Vigil's own crates rather than trusting the stubs' fingerprints.
COPY crates ./crates
# The commit `vigil --version` prints (build.rs; there is no .git in the build context's copy).
ARG VIGIL_GIT_COMMIT=""
RUN find crates -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p vigil

FROM gcr.io/distroless/cc-debian12:nonroot
# The release profile leaves out debug info but keeps the symbol table: a panic's backtraces
# (RUST_BACKTRACE=1) name the functions. For file:line, build `--profile release-debug`.
COPY --from=build /src/target/release/vigil /usr/local/bin/vigil
# distroless's nonroot user; the Deployment also enforces runAsNonRoot and a read-only root.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/vigil"]
CMD ["run"]
