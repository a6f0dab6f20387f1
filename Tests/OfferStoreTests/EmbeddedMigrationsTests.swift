import Foundation
import OfferTestSupport
import Postgres
import Testing

@testable import OfferStore

/// The promise `ops/gen-migrations` makes: the schema the binaries carry (`OfferDatabase.migrations`, generated
/// into `Sources/OfferStore/Schema/EmbeddedMigrations.swift`) is `migrations/*.sql`, so a migration edited without
/// regenerating fails here instead of shipping a binary that migrates to an older schema.
@Suite("Embedded migrations")
struct EmbeddedMigrationsTests {
    static let directory = PackagePaths.root.appendingPathComponent("migrations")

    @Test("equal migrations/*.sql: same versions, same names, same SQL byte for byte")
    func embeddedEqualFiles() throws {
        let files = try Migration.load(directory: Self.directory)
        let embedded = OfferDatabase.migrations
        #expect(!files.isEmpty)
        #expect(embedded.map(\.version) == files.map(\.version))
        #expect(embedded.map(\.name) == files.map(\.name))
        for (embedded, file) in zip(embedded, files) {
            // ops/gen-migrations embeds each file's text without its trailing newlines (it strips them before the
            // literal's closing delimiter); every other byte is the file's.
            var text = Array(file.sql.utf8)
            while text.last == UInt8(ascii: "\n") { text.removeLast() }
            let bytes = Array(embedded.sql.utf8)
            // Bytes, not String ==, which would equate canonically equivalent Unicode spellings.
            let common = min(bytes.count, text.count)
            let firstDifference = (0..<common).first { bytes[$0] != text[$0] } ?? common
            #expect(
                bytes == text,
                """
                migration \(file.version)_\(file.name): embedded \(bytes.count) bytes, file \(text.count) bytes, first \
                difference at byte \(firstDifference); run ops/gen-migrations
                """)
        }
    }
}
