import Foundation
import Testing

@testable import Postgres

@Suite("Encoding and decoding without a server")
struct CodingTests {
    func cell(_ text: String?, _ type: PostgresDataType, name: String = "c") -> PostgresCell {
        PostgresCell(bytes: text.map { Array($0.utf8)[...] }, type: type, columnName: name, columnIndex: 0)
    }

    @Test("text-like columns and user-defined types decode as String; others are refused")
    func stringDecodesTextLikeColumnsOnly() throws {
        for type in [PostgresDataType.text, .varchar, .bpchar, .name, .unknown, .json, .jsonb, .uuid, .numeric] {
            #expect(try String.decode(from: cell("v", type)) == "v", "\(type)")
        }
        // An enum or citext column: its OID is the database's own (16384 and above).
        #expect(try String.decode(from: cell("gold", PostgresDataType(16_384))) == "gold")
        #expect(try String.decode(from: cell("gold", PostgresDataType(91_234))) == "gold")
        for type in [PostgresDataType.int4, .int8, .bool, .bytea, .timestamptz, PostgresDataType(16_383)] {
            #expect(throws: PostgresError.self, "\(type)") { try String.decode(from: cell("1", type)) }
        }
    }

    @Test func interpolationBindsValuesAsPlaceholders() {
        let secret = "x'; DROP TABLE t; --"
        let n: Int64? = nil
        let q: PostgresQuery = "SELECT * FROM t WHERE a = \(secret) AND b = \(42) AND c = \(n)"
        #expect(q.sql == "SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3")
        #expect(q.binds.count == 3)
        #expect(q.binds[0] == PostgresBind(type: .text, text: secret))
        #expect(q.binds[1] == PostgresBind(type: .int8, text: "42"))
        #expect(q.binds[2] == PostgresBind(type: .int8, bytes: nil))
        #expect(!q.description.contains("DROP"))
    }

    @Test func appendingQueriesRenumbersPlaceholdersOutsideQuotes() {
        var q: PostgresQuery = "SELECT \(1) WHERE x = \(2)"
        q.append(" AND y = \(3) AND z = '$1' AND w = \(4)")
        #expect(q.sql == "SELECT $1 WHERE x = $2 AND y = $3 AND z = '$1' AND w = $4")
        #expect(q.binds.map { $0.bytes.map { String(decoding: $0, as: UTF8.self) } } == ["1", "2", "3", "4"])
        // Multi-byte characters around placeholders, inside and outside quotes, survive the renumbering.
        q.append(" AND \"näme$1\" = 'é$2😀' AND v = \(5) -- ünï $10")
        #expect(q.sql.hasSuffix(" AND \"näme$1\" = 'é$2😀' AND v = $5 -- ünï $14"))
        // A fragment without binds has no placeholders of its own: appended as it is.
        var plain: PostgresQuery = "SELECT \(1)"
        plain.append(.unsafeRaw(" FROM t"))
        #expect(plain.sql == "SELECT $1 FROM t")
        let inner: PostgresQuery = "b = \("v")"
        let outer: PostgresQuery = "a = \(true) AND \(query: inner)"
        #expect(outer.sql == "a = $1 AND b = $2")
        var raw = PostgresQuery.unsafeRaw("SELECT 1")
        raw.appendUnsafeRaw(" + 2")
        #expect(raw.sql == "SELECT 1 + 2")
        #expect(raw.binds.isEmpty)
    }

    @Test(arguments: [
        ("{}", [String?]()),
        ("{a,b}", ["a", "b"]),
        ("{\"a,b\",\"c}\",\"{d\"}", ["a,b", "c}", "{d"]),
        ("{\"with \\\"quote\\\"\",\"back\\\\slash\"}", ["with \"quote\"", "back\\slash"]),
        ("{NULL,\"NULL\",null}", [nil, "NULL", "null"]),
        ("{\"\",\" \"}", ["", " "]),
        ("{héllo,\"😀 x\",\u{2063}}", ["héllo", "😀 x", "\u{2063}"]),
        ("[0:1]={x,y}", ["x", "y"]),
    ])
    func arrayLiteralParsing(literal: String, expected: [String?]) throws {
        let parsed = try [String?].decode(from: cell(literal, .textArray))
        #expect(parsed == expected)
    }

    @Test(arguments: ["{{a},{b}}", "{a", "a}", "{\"a}", "{a}x", ""])
    func malformedArrayLiteralsThrowWithoutEchoingTheValue(literal: String) {
        #expect(throws: PostgresError.self) { try [String?].decode(from: cell(literal, .textArray)) }
    }

    @Test func nullElementInNonOptionalArrayIsADecodeError() throws {
        #expect(try [String].decode(from: cell("{a,b}", .textArray)) == ["a", "b"])
        let error = #expect(throws: PostgresError.self) { try [String].decode(from: cell("{a,NULL}", .textArray)) }
        #expect(error?.kind == .decode)
        #expect(error?.decodeColumn?.contains("c[2]") == true)
    }

    @Test func arrayEncodingQuotesAndEscapes() {
        let bind = String.postgresArrayLiteralBind(["a", "b,c", "q\"", "s\\", "NULL"])
        #expect(bind.type == .textArray && bind.format == .text)
        #expect(bind.bytes.map { String(decoding: $0, as: UTF8.self) } == #"{"a","b,c","q\"","s\\","NULL"}"#)
        let ints: [Int64?] = [1, nil, -3]
        // The literal form stays available (and is what types without a binary form send, e.g. dates).
        #expect(
            [Int64?].Element.postgresArrayLiteralBind(ints).bytes.map { String(decoding: $0, as: UTF8.self) }
                == #"{"1",NULL,"-3"}"#)
        #expect(ints.postgresBind().type == .int8Array)
    }

    @Test(arguments: [
        ("2024-03-01 12:00:00+00", 1_709_294_400.0),
        ("2024-03-01 17:30:00+05:30", 1_709_294_400.0),
        ("2024-03-01 08:30:00-03:30", 1_709_294_400.0),
        ("2024-03-01T12:00:00Z", 1_709_294_400.0),
        ("2024-03-01 12:00:00.5+00", 1_709_294_400.5),
        ("2024-03-01 12:00:00.123456+00", 1_709_294_400.123456),
        ("1900-01-01 00:19:32+00:19:32", -2_208_988_800.0),
        ("1969-12-31 23:59:59.999999+00", -0.000001),
        ("2000-02-29 00:00:00+00", 951_782_400.0),
    ])
    func timestampParsing(text: String, seconds: Double) throws {
        let date = try Date.decode(from: cell(text, .timestamptz))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.0000005)
    }

    @Test(arguments: ["infinity", "-infinity", "2024-13-01 00:00:00+00", "2024-03-01", "2024-03-01 12:00:00 BC"])
    func unsupportedTimestampsThrow(text: String) {
        #expect(throws: PostgresError.self) { try Date.decode(from: cell(text, .timestamptz)) }
    }

    @Test func timestampFormatting() {
        #expect(
            PostgresTimestamp.format(Date(timeIntervalSince1970: 1_709_294_400.123456))
                == "2024-03-01T12:00:00.123456Z")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: -0.000001)) == "1969-12-31T23:59:59.999999Z")
        #expect(PostgresTimestamp.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000000Z")
    }

    @Test func numericKeepsExactText() throws {
        let text = "12345678901234567890.123456789"
        let n = try PostgresNumeric.decode(from: cell(text, .numeric))
        #expect(n.text == text)
        #expect(n.decimal == Decimal(string: text))
        #expect(PostgresNumeric(Decimal(string: "-0.5")!)?.text == "-0.5")
        #expect(PostgresNumeric("1e5") == nil)
        #expect(PostgresNumeric("NaN")?.decimal == nil)
        #expect(PostgresNumeric("12.") == nil)
        #expect(PostgresNumeric(Int64.min).text == "-9223372036854775808")
    }

    @Test func integersAreRangeChecked() throws {
        #expect(try Int16.decode(from: cell("32767", .int4)) == 32767)
        #expect(throws: PostgresError.self) { try Int16.decode(from: cell("32768", .int4)) }
        #expect(throws: PostgresError.self) { try Int64.decode(from: cell("1", .text)) }
    }

    @Test func byteaHex() throws {
        #expect(try [UInt8].decode(from: cell("\\x00ff10", .bytea)) == [0, 255, 16])
        #expect(try Data.decode(from: cell("\\x", .bytea)) == Data())
        #expect(throws: PostgresError.self) { try [UInt8].decode(from: cell("\\x0", .bytea)) }
        #expect([UInt8]([1, 2]).postgresBind() == PostgresBind(type: .bytea, format: .binary, bytes: [1, 2]))
    }

    @Test func decodeErrorNamesColumnAndTypeButNotValue() {
        let error = #expect(throws: PostgresError.self) {
            try UUID.decode(from: cell("very-secret-value", .uuid, name: "code_id"))
        }
        let text = error.map { "\($0)" } ?? ""
        #expect(text.contains("code_id"))
        #expect(text.contains("uuid"))
        #expect(!text.contains("very-secret-value"))
        let null = #expect(throws: PostgresError.self) { try Int64.decodeNull(from: cell(nil, .int8, name: "n")) }
        #expect(null?.decodeColumn == "n (#0)")
    }

    /// `[String]` goes as a binary `text[]` (array_send's layout), and errors are scrubbed of each of its elements.
    @Test func stringArraysAreBinaryTextArrays() throws {
        let bind = ["ab", "", "é"].postgresBind()
        #expect(bind.type == .textArray && bind.format == .binary)
        let header: [UInt8] = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 25, 0, 0, 0, 3, 0, 0, 0, 1]
        let elements: [UInt8] = [0, 0, 0, 2, 0x61, 0x62, 0, 0, 0, 0, 0, 0, 0, 2, 0xC3, 0xA9]
        #expect(bind.bytes == header + elements)
        #expect([String]().postgresBind().bytes == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 25])
        let awkward = ["a", "b,c", "", "q\"", "NULL", "ünï 😀", String(repeating: "x", count: 20_000)]
        let awkwardBytes = try #require(awkward.postgresBind().bytes)
        let decoded = try #require(PostgresBinaryArray.decode(awkwardBytes))
        #expect(decoded.elementOID == 25)
        #expect(decoded.elements.map { String(decoding: $0 ?? [], as: UTF8.self) } == awkward)
        #expect(PostgresBinaryArray.decode([0, 0, 0, 1]) == nil)
        #expect(PostgresBinaryArray.decode(header + elements.dropLast()) == nil)
        let scrubbed = PostgresError.scrub(
            "Key (code)=(SECRET-CODE-1) already exists", binds: [["other", "SECRET-CODE-1"].postgresBind()])
        #expect(scrubbed == "Key (code)=(<redacted>) already exists")
    }

    /// UUIDs, integers and optionals go as binary arrays too (NULL: length -1, and the has-nulls flag set), and
    /// errors are scrubbed of the text elements of an optional array.
    @Test func otherArraysAreBinaryWithNulls() throws {
        let uuid = try #require(UUID(uuidString: "00112233-4455-6677-8899-aabbccddeeff"))
        let uuids = [uuid].postgresBind()
        #expect(uuids.type == .uuidArray && uuids.format == .binary)
        #expect(
            uuids.bytes
                == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0x0B, 0x86, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 16]
                + (0..<16).map { UInt8($0) * 0x11 })
        let ints = [Int64(-2), 1].postgresBind()
        #expect(ints.type == .int8Array && ints.format == .binary)
        #expect(
            ints.bytes
                == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 20, 0, 0, 0, 2, 0, 0, 0, 1]
                + [0, 0, 0, 8, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1])
        #expect([Int32(7)].postgresBind().bytes?.suffix(8) == [0, 0, 0, 4, 0, 0, 0, 7])
        let optional: [String?] = ["a", nil, "SECRET-TOKEN-2"]
        let bind = optional.postgresBind()
        #expect(bind.type == .textArray && bind.format == .binary)
        let bytes = try #require(bind.bytes)
        #expect(bytes[0..<12] == [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 25])
        #expect(bytes[20..<29] == [0, 0, 0, 1, 0x61, 0xFF, 0xFF, 0xFF, 0xFF])
        let decoded = try #require(PostgresBinaryArray.decode(bytes))
        #expect(decoded.elements == [[0x61], nil, Array("SECRET-TOKEN-2".utf8)])
        #expect([UUID?]([nil]).postgresBind().bytes?.suffix(4) == [0xFF, 0xFF, 0xFF, 0xFF])
        // Without nulls the flag stays 0; dates still go as literals.
        #expect([String?](["x"]).postgresBind().bytes?[7] == 0)
        #expect([Date()].postgresBind().format == .text)
        let scrubbed = PostgresError.scrub("token (SECRET-TOKEN-2) is bad", binds: [bind])
        #expect(scrubbed == "token (<redacted>) is bad")
    }

    @Test func errorDescriptionRedactsQuotedFragmentsAndScrubsBinds() {
        let binds = [PostgresBind(type: .text, text: "hunter2-secret")]
        let scrubbed = PostgresError.scrub("bad value hunter2-secret here", binds: binds)
        #expect(scrubbed == "bad value <redacted> here")
        let e = PostgresError(
            kind: .server, message: "invalid input syntax for type integer: \"abc\"", sqlState: "22P02",
            detail: "Key (x)=(abc)", query: "SELECT $1::int")
        #expect(e.description == "PostgresError(server, sqlState: 22P02): invalid input syntax for type integer: \"…\"")
        #expect(e.debugDescription.contains("SELECT $1::int"))
        #expect(e.debugDescription.contains("Key (x)=(abc)"))
        #expect(!e.description.contains("abc"))
    }

    @Test func retryableClassification() {
        func server(_ state: String) -> PostgresError { PostgresError(kind: .server, message: "m", sqlState: state) }
        #expect(server("40001").isRetryable)
        #expect(server("40P01").isRetryable)
        #expect(server("57P01").isRetryable)
        #expect(server("57P03").isRetryable)
        #expect(server("08006").isRetryable)
        #expect(!server("23505").isRetryable)
        #expect(server("23505").isUniqueViolation)
        #expect(PostgresError(kind: .connection, message: "gone").isRetryable)
        #expect(!PostgresError(kind: .decode, message: "x").isRetryable)
    }

    @Test func migrationFileNames() {
        #expect(Migration.parseFileName("0001_init.sql")! == (1, "init"))
        #expect(Migration.parseFileName("12_add-codes_2.sql")! == (12, "add-codes_2"))
        #expect(Migration.parseFileName("init.sql") == nil)
        #expect(Migration.parseFileName("x1_init.sql") == nil)
        #expect(Migration.parseFileName("0001_.sql") == nil)
        #expect(Migration.parseFileName("0001_bad name.sql") == nil)
    }

    @Test func migrationDirectoryLoading() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("og-mig-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try "CREATE TABLE b();".write(to: dir.appendingPathComponent("0002_b.sql"), atomically: true, encoding: .utf8)
        try "CREATE TABLE a();".write(to: dir.appendingPathComponent("0001_a.sql"), atomically: true, encoding: .utf8)
        try "notes".write(to: dir.appendingPathComponent("README.md"), atomically: true, encoding: .utf8)
        let loaded = try Migration.load(directory: dir)
        #expect(
            loaded == [
                Migration(version: 1, name: "a", sql: "CREATE TABLE a();"),
                Migration(version: 2, name: "b", sql: "CREATE TABLE b();"),
            ])
        try "x".write(to: dir.appendingPathComponent("002_dup.sql"), atomically: true, encoding: .utf8)
        let dup = #expect(throws: PostgresError.self) { try Migration.load(directory: dir) }
        #expect(dup?.kind == .invalidMigration)
        try FileManager.default.removeItem(at: dir.appendingPathComponent("002_dup.sql"))
        try "x".write(to: dir.appendingPathComponent("three.sql"), atomically: true, encoding: .utf8)
        let bad = #expect(throws: PostgresError.self) { try Migration.load(directory: dir) }
        #expect(bad?.kind == .invalidMigration)
    }

    @Test func configurationAddsSessionSettings() throws {
        let config = try PostgresConfiguration(conninfo: "host=/tmp user=u options='-c work_mem=64MB'")
        let params = Dictionary(try config.parameters(), uniquingKeysWith: { _, b in b })
        #expect(params["options"] == "-c work_mem=64MB " + PostgresConfiguration.sessionOptions)
        #expect(params["client_encoding"] == "UTF8")
        #expect(params["user"] == "u")
        #expect(throws: PostgresError.self) { try PostgresConfiguration(conninfo: "host=/tmp bogus_key=1") }
        let other = try config.with(database: "db2")
        #expect(Dictionary(try other.parameters(), uniquingKeysWith: { _, b in b })["dbname"] == "db2")
        let uri = try PostgresConfiguration(conninfo: "postgresql://u@localhost:5433/app").with(database: "x")
        let uriParams = Dictionary(try uri.parameters(), uniquingKeysWith: { _, b in b })
        #expect(uriParams["dbname"] == "x")
        #expect(uriParams["port"] == "5433")
    }

    /// Keepalives and a short connect timeout by default, so a vanished primary is noticed; a conninfo that sets
    /// any keepalive parameter keeps its own and gets none of the defaults, and one that sets `connect_timeout`
    /// keeps it (it is not replaced by the default).
    @Test func configurationAddsKeepalivesUnlessTheConninfoSetsThem() throws {
        let plain = try PostgresConfiguration(conninfo: "postgresql://u@h1:5432,h2:5432/app")
        let params = Dictionary(try plain.parameters(), uniquingKeysWith: { _, b in b })
        #expect(params["keepalives"] == "1")
        #expect(params["keepalives_idle"] == "5")
        #expect(params["keepalives_interval"] == "1")
        #expect(params["keepalives_count"] == "3")
        #expect(params["tcp_user_timeout"] == "10000")
        #expect(params["connect_timeout"] == "3")
        let own = try PostgresConfiguration(conninfo: "postgresql://u@h1/app?keepalives_idle=30")
        let ownParams = try own.parameters()
        #expect(ownParams.filter { $0.0 == "keepalives_idle" }.map(\.1) == ["30"])
        #expect(!ownParams.contains { $0.0 == "keepalives_count" || $0.0 == "tcp_user_timeout" })
        let renamed = Dictionary(try plain.with(database: "db2").parameters(), uniquingKeysWith: { _, b in b })
        #expect(renamed["keepalives_idle"] == "5")
        for conninfo in ["postgresql://u@h1/app?connect_timeout=20", "host=/sock dbname=app connect_timeout=20"] {
            let patient = try PostgresConfiguration(conninfo: conninfo).with(database: "db2").parameters()
            #expect(patient.filter { $0.0 == "connect_timeout" }.map(\.1) == ["20"], "\(conninfo)")
        }
        let none = try PostgresConfiguration(conninfo: "host=/sock", connectTimeoutSeconds: nil).parameters()
        #expect(!none.contains { $0.0 == "connect_timeout" })
    }
}
