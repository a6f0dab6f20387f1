import Foundation
import OfferTestSupport
import Postgres
import Testing

extension PostgresIntegrationTests {
    @Suite("Type round trips")
    struct TypeRoundTripTests {
        /// Every array sent in binary reaches the server element for element, NULLs included, through `unnest`
        /// as the batched statements use it.
        @Test func binaryArraysUnnestOnTheServer() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let uuids = [UUID(), UUID(), UUID()]
                let optionalUUIDs: [UUID?] = [nil, uuids[0], nil]
                let ints: [Int64] = [0, -1, Int64.max, Int64.min]
                let small: [Int32] = [Int32.min, 0, Int32.max]
                let texts: [String?] = ["a", nil, "", "q\"uote,{x} NULL", "ünï 😀"]
                let rows = try await pool.query(
                    """
                    SELECT array_agg(u::text ORDER BY o), array_agg(coalesce(ou::text, 'null') ORDER BY o)
                    FROM unnest(\(uuids)::uuid[], \(optionalUUIDs)::uuid[]) WITH ORDINALITY AS r(u, ou, o)
                    """)
                #expect(try rows[0].decode([String].self, at: 0) == uuids.map { $0.uuidString.lowercased() })
                #expect(
                    try rows[0].decode([String].self, at: 1)
                        == optionalUUIDs.map { $0?.uuidString.lowercased() ?? "null" })
                #expect(try await pool.query("SELECT \(ints)::int8[]").scalar([Int64].self) == ints)
                #expect(try await pool.query("SELECT \(small)::int4[]").scalar([Int32].self) == small)
                #expect(try await pool.query("SELECT \(texts)::text[]").scalar([String?].self) == texts)
                #expect(try await pool.query("SELECT cardinality(\([UUID]())::uuid[])").scalar(Int64.self) == 0)
                #expect(try await pool.query("SELECT array_position(\(texts)::text[], NULL)").scalar(Int64.self) == 2)
            }
        }

        /// `decode(_:at:reusing:)` answers the previous string for the same bytes and decodes anything else as
        /// `decode(String.self, at:)` would, errors included.
        @Test func aRepeatedTextCellReusesThePreviousString() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let long = "original-transaction-0123456789"  // past the 15 bytes a string holds in place
                let rows = try await pool.query(
                    """
                    SELECT v, 7 AS n FROM unnest(ARRAY[\(long), \(long), \(long + "x"), 'é', NULL]) WITH ORDINALITY AS r(v, o)
                    ORDER BY o
                    """)
                let first = try rows[0].decode(String.self, at: 0, reusing: nil)
                #expect(first == long)
                let second = try rows[1].decode(String.self, at: 0, reusing: first)
                #expect(second == long)
                #expect(try rows[2].decode(String.self, at: 0, reusing: second) == long + "x")
                // Equal as Swift strings is not enough: the bytes must be the same ("é" precomposed vs decomposed).
                #expect(try rows[3].decode(String.self, at: 0, reusing: "e\u{301}").utf8.elementsEqual("é".utf8))
                #expect(throws: PostgresError.self) { try rows[4].decode(String.self, at: 0, reusing: long) }
                // An int column is not text, whatever string came before.
                #expect(throws: PostgresError.self) { try rows[0].decode(String.self, at: 1, reusing: "7") }
            }
        }

        @Test func everySupportedTypeRoundTripsThroughATable() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 2)
                defer { Task { await pool.close() } }
                try await pool.query(
                    """
                    CREATE TABLE t (
                        id int PRIMARY KEY, s text, v varchar(200), b bool, i2 int2, i4 int4, i8 int8, n numeric,
                        u uuid, ts timestamptz, by bytea, j jsonb, js json, arr text[], ints int8[], f float8
                    )
                    """)
                let text = "héllo 😀 \u{2063} 'quote' \"dq\" \\ back"
                let numeric = try #require(PostgresNumeric("12345678901234567890.123456789"))
                let uuid = UUID()
                let date = Date(timeIntervalSince1970: 1_709_294_400.123456)
                let bytes = (0..<(1 << 20) + 7).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
                let json = try PostgresJSON(encoding: ["k": "v ü", "n": "1"])
                let array = ["a", "b,c", "", " ", "{x}", "q\"uote", "back\\slash", "NULL", "null", "ünï 😀", "\u{2063}"]
                let ints: [Int64] = [0, -1, Int64.max, Int64.min]
                try await pool.query(
                    """
                    INSERT INTO t VALUES (1, \(text), \(text), \(true), \(Int16.min), \(Int32.max), \(Int64.min),
                        \(numeric), \(uuid), \(date), \(bytes), \(json), \(json), \(array), \(ints), \(2.5))
                    """)
                try await pool.query("INSERT INTO t (id) VALUES (2)")

                let rows = try await pool.query("SELECT * FROM t ORDER BY id")
                #expect(rows.count == 2)
                let row = rows[0]
                #expect(try row.decode(String.self, named: "s") == text)
                #expect(try row.decode(String.self, named: "v") == text)
                #expect(try row.decode(Bool.self, named: "b") == true)
                #expect(try row.decode(Int16.self, named: "i2") == Int16.min)
                #expect(try row.decode(Int32.self, named: "i4") == Int32.max)
                #expect(try row.decode(Int64.self, named: "i8") == Int64.min)
                #expect(try row.decode(Int.self, named: "i4") == Int(Int32.max))
                #expect(try row.decode(PostgresNumeric.self, named: "n") == numeric)
                #expect(try row.decode(PostgresNumeric.self, named: "n").decimal == Decimal(string: numeric.text))
                #expect(try row.decode(UUID.self, named: "u") == uuid)
                #expect(try row.decode(Date.self, named: "ts") == date)
                #expect(try row.decode([UInt8].self, named: "by") == bytes)
                #expect(try row.decode(Data.self, named: "by") == Data(bytes))
                #expect(
                    try row.decode(PostgresJSON.self, named: "j").decode([String: String].self) == [
                        "k": "v ü", "n": "1",
                    ])
                // The bind is jsonb (normalised spacing), then stored as json text.
                #expect(try row.decode(PostgresJSON.self, named: "js").text == #"{"k": "v ü", "n": "1"}"#)
                #expect(try row.decode([String].self, named: "arr") == array)
                #expect(try row.decode([Int64].self, named: "ints") == ints)
                #expect(try row.decode(Double.self, named: "f") == 2.5)

                // NULLs: optionals decode nil; non-optionals throw a decode error naming the column.
                let nulls = rows[1]
                #expect(try nulls.decode(String?.self, named: "s") == nil)
                #expect(try nulls.decode(PostgresNumeric?.self, named: "n") == nil)
                #expect(try nulls.decode([UInt8]?.self, named: "by") == nil)
                #expect(try nulls.decode([String]?.self, named: "arr") == nil)
                #expect(try nulls.decode(Date?.self, named: "ts") == nil)
                let error = await expectPostgresError { _ = try nulls.decode(Int64.self, named: "i8") }
                #expect(error?.kind == .decode)
                #expect(error?.decodeColumn == "i8 (#6)")

                // Binding NULL through optionals.
                let none: String? = nil
                let updated = try await pool.query("UPDATE t SET s = \(none) WHERE id = \(1)")
                #expect(updated.affectedRows == 1)
                #expect(updated.commandTag == "UPDATE 1")
                #expect(try await pool.query("SELECT s FROM t WHERE id = 1").scalar(String?.self) == .some(nil))
            }
        }

        @Test func textArraysWithNullElementsAndUnnestBatching() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let withNull: [String?] = ["a", nil, "NULL", "x,y"]
                let row = try #require(try await pool.query("SELECT \(withNull)::text[], ARRAY[]::text[]").first)
                #expect(try row.decode([String?].self, at: 0) == withNull)
                #expect(try row.decode([String].self, at: 1) == [])
                let error = await expectPostgresError { _ = try row.decode([String].self, at: 0) }
                #expect(error?.kind == .decode)
                // [String] binds in binary: empty, long and awkward elements come back as they went.
                let long = String(repeating: "JWS.", count: 5_000) + "\\\"{},"
                let sent: [[String]] = [[], [long, "", "NULL", "ünï 😀"]]
                for list in sent {
                    let echoed = try #require(
                        try await pool.query("SELECT \(list)::text[], cardinality(\(list)::text[])").first)
                    #expect(try echoed.decode([String].self, at: 0) == list)
                    #expect(try echoed.decode(Int64.self, at: 1) == Int64(list.count))
                }

                try await pool.query("CREATE TABLE codes (code text PRIMARY KEY, n int8)")
                let codes = (0..<100).map { "code-\($0)-ü" }
                let numbers = (0..<100).map { Int64($0) * 1_000_000_007 }
                let inserted = try await pool.query(
                    "INSERT INTO codes SELECT * FROM unnest(\(codes)::text[], \(numbers)::int8[])", prepared: true)
                #expect(inserted.affectedRows == 100)
                let back = try await pool.query("SELECT code, n FROM codes ORDER BY n")
                #expect(try back.map { try $0.decode(String.self, at: 0) } == codes)
                #expect(try back.map { try $0.decode(Int64.self, named: "n") } == numbers)
                let (code, n) = try back[3].decode(String.self, Int64.self)
                #expect(code == "code-3-ü" && n == 3_000_000_021)
            }
        }

        @Test func timestamptzWithZoneOffsets() async throws {
            try await TestDatabase.with { config in
                let connection = try await PostgresConnection.connect(configuration: config)
                // Session is UTC by default.
                let utc = try await connection.query("SELECT '2024-03-01 17:30:00.25+05:30'::timestamptz::text")
                #expect(try utc.scalar(String.self) == "2024-03-01 12:00:00.25+00")
                let cases: [(String, String, Double)] = [
                    ("Asia/Kolkata", "2024-03-01 12:00:00.123456+00", 1_709_294_400.123456),
                    ("America/St_Johns", "2024-07-01 00:00:00+00", 1_719_792_000),
                    ("Europe/Amsterdam", "1900-01-01 00:00:00+00", -2_208_988_800),
                ]
                for (zone, literal, seconds) in cases {
                    try await connection.query("SELECT set_config('TimeZone', \(zone), false)")
                    let rows = try await connection.query(
                        "SELECT \(literal)::timestamptz, \(literal)::timestamptz::text")
                    let (date, shown) = try rows[0].decode(Date.self, String.self)
                    #expect(abs(date.timeIntervalSince1970 - seconds) < 0.0000005, "\(zone): \(shown)")
                    // Round trip a Date bind under a non-UTC session zone.
                    let echoed = try await connection.query("SELECT \(date) = \(literal)::timestamptz")
                    #expect(try echoed.scalar(Bool.self) == true, "\(zone)")
                }
                // The zone offsets really were non-UTC.
                try await connection.query("SET TimeZone = 'Asia/Kolkata'")
                let shown = try await connection.query("SELECT '2024-03-01 12:00:00+00'::timestamptz::text")
                #expect(try shown.scalar(String.self) == "2024-03-01 17:30:00+05:30")
                await connection.close()
            }
        }

        @Test func numericPrecisionIsExact() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let values = ["12345678901234567890.123456789", "-0.000000000000000000001", "0", "NaN"]
                for text in values {
                    let n = try #require(PostgresNumeric(text))
                    let rows = try await pool.query("SELECT \(n), \(n)::text, \(n) * 2")
                    #expect(try rows[0].decode(PostgresNumeric.self, at: 0).text == text)
                    #expect(try rows[0].decode(String.self, at: 1) == text)
                }
                let doubled = try await pool.query("SELECT \(PostgresNumeric("12345678901234567890.123456789")) * 2")
                #expect(try doubled.scalar(PostgresNumeric.self)?.text == "24691357802469135780.246913578")
                let decimal = try #require(Decimal(string: "1234567.0001"))
                let fromDecimal = try #require(PostgresNumeric(decimal))
                #expect(try await pool.query("SELECT \(fromDecimal) = 1234567.0001").scalar(Bool.self) == true)
            }
        }

        @Test func decodingWrongTypeNamesColumnAndOID() async throws {
            try await TestDatabase.with { config in
                let pool = PostgresPool(configuration: config, maxConnections: 1)
                defer { Task { await pool.close() } }
                let rows = try await pool.query("SELECT 42::int4 AS answer")
                let error = await expectPostgresError { _ = try rows[0].decode(UUID.self, named: "answer") }
                #expect(error?.kind == .decode)
                #expect(error?.decodeColumn == "answer (#0)")
                #expect(error.map { "\($0)" }?.contains("int4") == true)
                #expect(error.map { "\($0)" }?.contains("42") == false)
                let missing = await expectPostgresError { _ = try rows[0].decode(Int.self, named: "nope") }
                #expect(missing?.kind == .decode)
                let range = await expectPostgresError { _ = try rows[0].decode(Int.self, at: 3) }
                #expect(range?.kind == .decode)
            }
        }
    }
}
