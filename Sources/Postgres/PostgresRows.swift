import CLibPQ

/// A result column: name and type OID.
public struct PostgresColumn: Sendable, Hashable {
    public var name: String
    public var type: PostgresDataType
}

/// Immutable storage of a copied-out result (all cells in one buffer). Visible to other modules' inlined code only
/// (``PostgresRow``'s decoding is `@inlinable`, so that it is specialised for the types the caller decodes).
@usableFromInline
final class PostgresRowsStorage: Sendable {
    @usableFromInline let columns: [PostgresColumn]
    let rowCount: Int
    /// All cell bytes, row-major.
    @usableFromInline let buffer: [UInt8]
    /// Start offset of each cell in `buffer`; length -1 marks NULL.
    @usableFromInline let offsets: [Int]
    @usableFromInline let lengths: [Int]

    init(columns: [PostgresColumn], rowCount: Int, buffer: [UInt8], offsets: [Int], lengths: [Int]) {
        self.columns = columns
        self.rowCount = rowCount
        self.buffer = buffer
        self.offsets = offsets
        self.lengths = lengths
    }

    /// Copies everything out of a `PGresult` (text format).
    convenience init(result: OpaquePointer) {
        let nFields = Int(PQnfields(result))
        let nTuples = Int(PQntuples(result))
        var columns: [PostgresColumn] = []
        columns.reserveCapacity(nFields)
        for c in 0..<nFields {
            let name = PQfname(result, Int32(c)).map { String(cString: $0) } ?? "?column?"
            columns.append(PostgresColumn(name: name, type: PostgresDataType(PQftype(result, Int32(c)))))
        }
        var total = 0
        for r in 0..<nTuples {
            for c in 0..<nFields { total += Int(PQgetlength(result, Int32(r), Int32(c))) }
        }
        var buffer = [UInt8]()
        buffer.reserveCapacity(total)
        var offsets = [Int]()
        var lengths = [Int]()
        offsets.reserveCapacity(nTuples * nFields)
        lengths.reserveCapacity(nTuples * nFields)
        for r in 0..<nTuples {
            for c in 0..<nFields {
                offsets.append(buffer.count)
                if PQgetisnull(result, Int32(r), Int32(c)) != 0 {
                    lengths.append(-1)
                    continue
                }
                let length = Int(PQgetlength(result, Int32(r), Int32(c)))
                if length > 0, let p = PQgetvalue(result, Int32(r), Int32(c)) {
                    p.withMemoryRebound(to: UInt8.self, capacity: length) {
                        buffer.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
                    }
                }
                lengths.append(length)
            }
        }
        self.init(columns: columns, rowCount: nTuples, buffer: buffer, offsets: offsets, lengths: lengths)
    }
}

/// The rows of a result, copied out of libpq (`Sendable`), plus the command tag and affected row count.
public struct PostgresRows: Sendable, RandomAccessCollection {
    let storage: PostgresRowsStorage
    /// The command tag, e.g. `INSERT 0 3`, `SELECT 2`, `BEGIN`.
    public let commandTag: String
    /// Rows affected (`PQcmdTuples`): for INSERT/UPDATE/DELETE/SELECT/MOVE/FETCH/COPY; nil otherwise.
    public let affectedRows: Int?

    init(storage: PostgresRowsStorage, commandTag: String, affectedRows: Int?) {
        self.storage = storage
        self.commandTag = commandTag
        self.affectedRows = affectedRows
    }

    init(result: OpaquePointer) {
        let tag = PQcmdStatus(result).map { String(cString: $0) } ?? ""
        let tuples = PQcmdTuples(result).map { String(cString: $0) } ?? ""
        self.init(storage: PostgresRowsStorage(result: result), commandTag: tag, affectedRows: Int(tuples))
    }

    /// The result columns.
    public var columns: [PostgresColumn] { storage.columns }

    public var startIndex: Int { 0 }
    public var endIndex: Int { storage.rowCount }
    public subscript(position: Int) -> PostgresRow { PostgresRow(storage: storage, index: position) }

    /// Decodes column 0 of row 0 (nil when there are no rows), e.g. for `SELECT count(*)`.
    public func scalar<T: PostgresDecodable>(_ type: T.Type = T.self) throws -> T? {
        guard let first else { return nil }
        return try first.decode(type, at: 0)
    }
}

/// One row of a `PostgresRows`. Its decoding is `@inlinable`: decoding a row is on the gateway's cold path (every
/// row of a customer's history), and a generic call from another module ran unspecialised, through witness tables.
public struct PostgresRow: Sendable {
    @usableFromInline let storage: PostgresRowsStorage
    @usableFromInline let index: Int

    /// Number of columns.
    public var count: Int { storage.columns.count }

    /// The cell at `column` (nil bytes for NULL).
    @inlinable
    public func cell(at column: Int) throws -> PostgresCell {
        guard column >= 0, column < storage.columns.count else { throw outOfRange(column) }
        let i = index * storage.columns.count + column
        let length = storage.lengths[i]
        let start = storage.offsets[i]
        let meta = storage.columns[column]
        return PostgresCell(
            bytes: length < 0 ? nil : storage.buffer[start..<(start + length)], type: meta.type,
            columnName: meta.name, columnIndex: column)
    }

    @usableFromInline
    func outOfRange(_ column: Int) -> PostgresError {
        PostgresError.decode(
            "column index \(column) out of range (\(storage.columns.count) columns)", column: "#\(column)")
    }

    /// Decodes the column at `index` (0-based).
    @inlinable
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, at column: Int) throws -> T {
        let cell = try cell(at: column)
        if cell.bytes == nil { return try T.decodeNull(from: cell) }
        return try T.decode(from: cell)
    }

    /// Decodes the first column called `name`.
    public func decode<T: PostgresDecodable>(_ type: T.Type = T.self, named name: String) throws -> T {
        // The first column of that name; a scan (results have few columns) instead of a dictionary per result.
        guard let column = storage.columns.firstIndex(where: { $0.name == name }) else {
            throw PostgresError.decode("no column named \(name)", column: name)
        }
        return try decode(type, at: column)
    }

    /// Decodes a text column as `decode(String.self, at:)` does, but answers `previous` itself, not a new string,
    /// when the cell holds the same bytes: consecutive rows often repeat a value (a customer's renewals share their
    /// original transaction and product), and a new string of more than 15 bytes is an allocation.
    @inlinable
    public func decode(_ type: String.Type, at column: Int, reusing previous: String?) throws -> String {
        let cell = try cell(at: column)
        if let previous, let bytes = cell.bytes, String.isTextLike(cell.type), previous.utf8.elementsEqual(bytes) {
            return previous
        }
        if cell.bytes == nil { return try String.decodeNull(from: cell) }
        return try String.decode(from: cell)
    }

    /// Decodes the first columns in order: `let (id, name) = try row.decode(Int64.self, String.self)`.
    @inlinable
    public func decode<each T: PostgresDecodable>(_ types: repeat (each T).Type) throws -> (repeat each T) {
        var column = 0
        func next<U: PostgresDecodable>(_ type: U.Type) throws -> U {
            defer { column += 1 }
            return try decode(type, at: column)
        }
        return (repeat try next(each types))
    }

    /// True when the column at `index` is NULL.
    public func isNull(at column: Int) throws -> Bool { try cell(at: column).bytes == nil }
}
