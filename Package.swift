// swift-tools-version:6.0
// OfferGate: a self-hosted, multi-tenant gateway for App Store subscription offers.
//
// Dependencies point inward: executables wire adapters together; adapters depend on the pure
// `OfferDomain`; `OfferDomain` depends on nothing of ours. No outside packages (none can be fetched here).
import PackageDescription

let package = Package(
    name: "OfferGate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "offergate", targets: ["offergate"]),
        .executable(name: "offerctl", targets: ["offerctl"]),
        .executable(name: "offer-load", targets: ["offer-load"]),
    ],
    targets: [
        // MARK: Pure core (no IO, imports only Foundation)
        .target(name: "OfferDomain"),

        // MARK: C system libraries
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // <sys/epoll.h>, which Swift's Glibc module does not export (header only: glibc has the functions).
        .systemLibrary(name: "CEpoll"),

        // MARK: Adapters
        .target(name: "OfferCrypto", dependencies: ["CCrypto"]),
        .target(name: "Postgres", dependencies: ["CLibPQ"]),
        .target(name: "OfferStore", dependencies: ["OfferDomain", "Postgres"]),
        .target(name: "JSONRPC", dependencies: ["CEpoll"]),
        .target(name: "CLIKit"),

        // MARK: Application
        .target(
            name: "OfferGateway",
            dependencies: ["OfferDomain", "OfferCrypto", "Postgres", "OfferStore", "JSONRPC"]
        ),
        .target(name: "OfferLoadKit", dependencies: ["JSONRPC", "Postgres"]),

        // MARK: Executables (wiring only)
        .executableTarget(
            name: "offergate",
            dependencies: ["OfferGateway", "CLIKit", "OfferStore", "OfferCrypto", "Postgres", "JSONRPC"]),
        .executableTarget(name: "offerctl", dependencies: ["JSONRPC", "CLIKit"]),
        .executableTarget(name: "offer-load", dependencies: ["OfferLoadKit", "CLIKit"]),
        // Micro-benchmarks of single layers (signing, JSON, domain) for ops/bench; not shipped.
        .executableTarget(name: "offer-bench", dependencies: ["OfferCrypto", "OfferDomain", "JSONRPC", "CLIKit"]),

        // MARK: Tests (mirror the sources)
        // Test-only support (fresh databases, restartable PostgreSQL clusters, spawning built binaries): used by the
        // test targets only, never by a shipped executable.
        .target(name: "OfferTestSupport", dependencies: ["Postgres"]),
        .testTarget(name: "OfferDomainTests", dependencies: ["OfferDomain"]),
        .testTarget(name: "OfferCryptoTests", dependencies: ["OfferCrypto"], resources: [.copy("Fixtures")]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "OfferTestSupport"]),
        .testTarget(
            name: "OfferStoreTests", dependencies: ["OfferStore", "OfferDomain", "Postgres", "OfferTestSupport"]),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC"]),
        .testTarget(
            name: "OfferGatewayTests",
            dependencies: [
                "OfferGateway", "JSONRPC", "OfferCrypto", "OfferStore", "OfferDomain", "Postgres", "OfferTestSupport",
            ]),
        .testTarget(name: "CLIKitTests", dependencies: ["CLIKit"]),
        .testTarget(
            name: "OfferLoadKitTests", dependencies: ["OfferLoadKit", "JSONRPC", "Postgres", "OfferTestSupport"]),
        // Runs the built offerctl against a real gateway (black-box, like an operator would).
        .testTarget(name: "OfferCtlTests", dependencies: ["JSONRPC", "Postgres", "OfferTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
