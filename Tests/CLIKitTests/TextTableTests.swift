import CLIKit
import Testing

@Suite struct TextTableTests {
    @Test func alignsColumnsWithoutTrailingSpaces() {
        var table = TextTable(headers: ["SLUG", "NAME", "BUNDLE ID"])
        table.append(["acme", "Acme Inc.", "com.acme.app"])
        table.append(["b2", "", "com.b.app"])
        #expect(
            table.render() == """
                SLUG  NAME       BUNDLE ID
                acme  Acme Inc.  com.acme.app
                b2               com.b.app

                """)
    }

    @Test func emptyTableRendersNothingButHeadersStay() {
        #expect(TextTable().render() == "")
        #expect(TextTable(headers: ["A", "BB"]).render() == "A  BB\n")
    }

    @Test func shortRowsArePaddedAndControlCharactersMasked() {
        var table = TextTable(headers: ["A", "B", "C"])
        table.append(["x"])
        table.append(["line\nbreak", "tab\there", "é"])
        #expect(
            table.render() == """
                A           B         C
                x
                line?break  tab?here  é

                """)
    }

    @Test func keyValueAlignsKeys() {
        #expect(TextTable.keyValue([("slug", "acme"), ("api key", "k")]) == "slug     acme\napi key  k\n")
    }

    @Test(arguments: [
        ("plain", "plain"),
        ("", ""),
        ("a,b", "\"a,b\""),
        ("say \"hi\"", "\"say \"\"hi\"\"\""),
        ("two\nlines", "\"two\nlines\""),
        ("cr\rhere", "\"cr\rhere\""),
        ("crlf\r\nhere", "\"crlf\r\nhere\""),
        ("2026-11-30T12:00:00Z", "2026-11-30T12:00:00Z"),
    ])
    func csvQuotesOnlyWhenNeeded(input: String, expected: String) {
        #expect(CSV.field(input) == expected)
    }

    @Test func csvRecord() {
        #expect(CSV.record(["code", "state", "redeemed_at"]) == "code,state,redeemed_at\n")
        #expect(CSV.record(["A,B", "", "x\"y"]) == "\"A,B\",,\"x\"\"y\"\n")
    }
}
