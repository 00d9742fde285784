# Vigil's container image: built in a Rust stage, run from a distroless non-root base.
# docker build -t vigil:0.1.0 .   then   vigil manifests --image vigil:0.1.0 | kubectl apply -f -

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits do not rebuild them.
COPY Cargo.toml Cargo.lock ./
COPY crates ./crates
RUN cargo build --release --locked -p vigil \
 && strip target/release/vigil

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/vigil /usr/local/bin/vigil
# distroless's nonroot user; the Deployment also enforces runAsNonRoot and a read-only root.
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/vigil"]
CMD ["run"]
