# The image charts/sluice runs: the `sluice` binary (`serve` in the sluice Deployment, `bootstrap`
# in the Envoy Deployment's init container) on a distroless base, as a non-root user.
#   docker build -t REGISTRY/sluice:TAG .
# then install the chart with --set image.repository=REGISTRY/sluice,image.tag=TAG (docs/helm.md).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin sluice

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/sluice /usr/local/bin/sluice
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/sluice"]
