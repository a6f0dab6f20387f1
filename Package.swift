// swift-tools-version:6.0
// OfferGate: a self-hosted, multi-tenant gateway for App Store subscription offers.
//
// Dependencies point inward: executables wire adapters together; adapters depend on the pure
// `OfferDomain`; `OfferDomain` depends on nothing of ours but the leaf `CivilTime` (pure arithmetic, no IO, no
// dependencies). No outside packages (none can be fetched here). Linux only (libpq, epoll): no `platforms:` entry,
// since SwiftPM's platform list can only name Apple platforms, and naming one would promise a build that fails.
import PackageDescription

let package = Package(
    name: "OfferGate",
    products: [
        .executable(name: "offergate", targets: ["offergate"]),
        .executable(name: "offerctl", targets: ["offerctl"]),
        .executable(name: "offer-load", targets: ["offer-load"]),
    ],
    targets: [
        // MARK: Leaf utilities (no dependencies, not even Foundation; no IO): one copy each, for every layer
        .target(name: "CivilTime"),
        .target(name: "ByteCoding"),

        // MARK: Pure core (no IO; imports only Foundation and the leaf CivilTime)
        .target(name: "OfferDomain", dependencies: ["CivilTime"]),
        // Leaf utility: the latency histogram the gateway's stats and the load harness share.
        .target(name: "Metrics"),

        // MARK: C system libraries
        .systemLibrary(name: "CLibPQ", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // <sys/epoll.h>, which Swift's Glibc module does not export (header only: glibc has the functions).
        .systemLibrary(name: "CEpoll"),
        // posix_spawn's close-from file action, which Swift's Glibc module does not export (header only).
        .systemLibrary(name: "CSpawn"),
        // A thread's kernel name (prctl), which Swift's Glibc module cannot call (header only).
        .systemLibrary(name: "CThreadName"),
        // MARK: HTTP (issue 13): libmicrohttpd serves, libcurl is the harness's and the tests' client
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

        // MARK: Adapters
        // Threads of our own, named for the kernel: where the products' modules start every thread.
        .target(name: "Threads", dependencies: ["CThreadName"]),
        .target(name: "OfferCrypto", dependencies: ["CCrypto", "ByteCoding"]),
        .target(name: "Postgres", dependencies: ["CLibPQ", "CSpawn", "CivilTime", "ByteCoding", "Threads"]),
        .target(name: "OfferStore", dependencies: ["OfferDomain", "Postgres"]),
        .target(name: "JSONRPC", dependencies: ["CEpoll", "CivilTime", "ByteCoding", "Threads"]),
        .target(name: "CLIKit"),
        // HTTP/1.1 listener on libmicrohttpd (ListenAddress and listening sockets come from JSONRPC) and HTTP client
        // on libcurl.
        .target(name: "HTTPServer", dependencies: ["CMicroHTTPD", "JSONRPC", "Threads"]),
        .target(name: "HTTPClient", dependencies: ["CCurl", "CEpoll", "Threads"]),

        // MARK: Application
        .target(
            name: "OfferGateway",
            dependencies: ["OfferDomain", "OfferCrypto", "OfferStore", "JSONRPC", "Metrics", "HTTPServer", "Threads"]
        ),
        .target(
            name: "OfferLoadKit",
            dependencies: ["JSONRPC", "OfferStore", "OfferCrypto", "Metrics", "HTTPClient", "ByteCoding"]),

        // MARK: Executables (wiring only)
        .executableTarget(
            name: "offergate",
            dependencies: ["OfferGateway", "CLIKit", "OfferStore", "OfferCrypto", "Postgres", "JSONRPC", "HTTPServer"]),
        .executableTarget(
            name: "offerctl", dependencies: ["JSONRPC", "CLIKit", "OfferDomain", "ByteCoding", "CSpawn", "Threads"]),
        .executableTarget(name: "offer-load", dependencies: ["OfferLoadKit", "CLIKit"]),
        // Micro-benchmarks of single layers (signing, JSON, domain) for ops/bench; not shipped.
        .executableTarget(
            name: "offer-bench", dependencies: ["OfferCrypto", "OfferDomain", "JSONRPC", "CLIKit", "Threads"]),

        // MARK: Tests (mirror the sources)
        // Test-only support (fresh databases, restartable PostgreSQL clusters, spawning built binaries): used by the
        // test targets only, never by a shipped executable.
        .target(name: "OfferTestSupport", dependencies: ["Postgres", "CSpawn"]),
        .testTarget(name: "CivilTimeTests", dependencies: ["CivilTime"]),
        .testTarget(name: "ByteCodingTests", dependencies: ["ByteCoding"]),
        .testTarget(name: "OfferDomainTests", dependencies: ["OfferDomain"]),
        .testTarget(name: "OfferCryptoTests", dependencies: ["OfferCrypto"], resources: [.copy("Fixtures")]),
        .testTarget(name: "PostgresTests", dependencies: ["Postgres", "OfferTestSupport"]),
        .testTarget(
            name: "OfferStoreTests", dependencies: ["OfferStore", "OfferDomain", "Postgres", "OfferTestSupport"]),
        .testTarget(name: "JSONRPCTests", dependencies: ["JSONRPC", "OfferTestSupport"]),
        .testTarget(
            name: "OfferGatewayTests",
            dependencies: [
                "OfferGateway", "JSONRPC", "OfferCrypto", "OfferStore", "OfferDomain", "Postgres", "OfferTestSupport",
                "HTTPServer", "HTTPClient", "Metrics",
            ],
            // Read from the source tree by the tests (PackagePaths.root), not bundled.
            exclude: ["Fixtures/AppleSignedData", "Fixtures/StoreKitReal", "HTTPScripts"]),
        .testTarget(name: "CLIKitTests", dependencies: ["CLIKit"]),
        .testTarget(name: "MetricsTests", dependencies: ["Metrics"]),
        .testTarget(
            name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTPClient", "JSONRPC", "OfferTestSupport"]),
        .testTarget(
            name: "OfferLoadKitTests",
            dependencies: ["OfferLoadKit", "JSONRPC", "Postgres", "OfferTestSupport", "Metrics", "OfferCrypto"]),
        // Runs the built offerctl against a real gateway (black-box, like an operator would).
        .testTarget(name: "OfferCtlTests", dependencies: ["JSONRPC", "Postgres", "OfferTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
