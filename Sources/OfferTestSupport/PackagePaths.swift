import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Where things are in the package the tests were built from.
public enum PackagePaths {
    /// The package root (three levels above this file: Sources/OfferTestSupport/PackagePaths.swift).
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The built executable `name`: beside the test runner when it is there (so `-c release` tests use release
    /// binaries), else `.build/debug/<name>` of the package.
    public static func binary(_ name: String) -> String {
        var candidates: [String] = []
        if let exe = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            candidates.append(URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path)
        }
        let debug = root.appendingPathComponent(".build/debug").appendingPathComponent(name).path
        candidates.append(debug)
        return candidates.first { access($0, X_OK) == 0 } ?? debug
    }

    /// A built executable is missing.
    public struct MissingBinary: Error, CustomStringConvertible {
        /// Where it was looked for.
        public let path: String
        public var description: String { "\(path) is missing: build first (swift build --build-tests)" }
    }

    /// `binary(name)`, or `MissingBinary` when it is not built.
    public static func requireBinary(_ name: String) throws -> String {
        let path = binary(name)
        guard access(path, X_OK) == 0 else { throw MissingBinary(path: path) }
        return path
    }

    /// A fresh scratch directory under the temporary directory, named `<prefix>-<random>`.
    public static func scratch(_ prefix: String = "og-test") throws -> URL {
        let url = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent(prefix + "-" + UUID().uuidString.prefix(8).lowercased())
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}
