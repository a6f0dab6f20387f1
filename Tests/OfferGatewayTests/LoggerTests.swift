import Foundation
import Testing

@testable import OfferGateway

@Test func logLinesAreOneJSONObjectWithSortedMetadataAndEscapedText() throws {
    let sink = MemoryLogSink()
    let logger = Logger(level: .info, sink: sink, metadata: ["tenant": "acme"])
    logger.debug("hidden")
    logger.info("line \"one\"\nnext\u{01}", ["rpc.method": "offers.best", "latency_ms": "1.5"])
    #expect(sink.all.count == 1)
    let line = try #require(sink.all.first)
    let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
    #expect(object["msg"] == "line \"one\"\nnext\u{01}")
    #expect(object["level"] == "info")
    #expect(object["tenant"] == "acme")
    #expect(object["rpc.method"] == "offers.best")
    #expect(line.contains(#""latency_ms":"1.5","rpc.method":"offers.best","tenant":"acme"}"#))
}

@Test func timestampsAreRFC3339UTCWithMilliseconds() {
    #expect(Logger.timestamp(Date(timeIntervalSince1970: 1_764_504_000.25)) == "2025-11-30T12:00:00.250Z")
}

@Test(arguments: [("debug", LogLevel.debug), ("INFO", .info), ("warn", .warning), ("error", .error)])
func levelNamesParse(name: String, level: LogLevel) {
    #expect(LogLevel(name: name) == level)
}
