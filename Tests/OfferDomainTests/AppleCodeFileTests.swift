import Foundation
import OfferDomain
import Testing

@Suite("App Store Connect's one-time codes file")
struct AppleCodeFileTests {
    struct Case: Sendable, CustomStringConvertible {
        let name: String
        let text: String
        let codes: [String]
        let duplicates: [Int]
        let invalid: [Int]
        let header: Int?
        var description: String { name }
    }

    static let cases: [Case] = [
        Case(
            name: "one code per line", text: "AAAA1111BBBB2222CC\nDDDD3333EEEE4444FF\n",
            codes: ["AAAA1111BBBB2222CC", "DDDD3333EEEE4444FF"], duplicates: [], invalid: [], header: nil),
        Case(
            name: "a header, CRLF, blank lines", text: "Code\r\nAAAA1111\r\n\r\nBBBB2222\r\n",
            codes: ["AAAA1111", "BBBB2222"], duplicates: [], invalid: [], header: 1),
        Case(
            name: "a header that is not a code", text: "Offer Code (one-time)\nAAAA1111\n",
            codes: ["AAAA1111"], duplicates: [], invalid: [], header: 1),
        Case(
            name: "CSV: code in the first column, quoted, with BOM",
            text: "\u{FEFF}\"Code\",\"Expiration Date\"\n\"aaaa-1111\",\"2027-05-01\"\nBBBB2222;x\nCCCC3333\tx\n",
            codes: ["AAAA1111", "BBBB2222", "CCCC3333"], duplicates: [], invalid: [], header: 1),
        Case(
            name: "duplicates and invalid lines are reported by number",
            text: "AAAA1111\nbad*code\nAAAA1111\n" + String(repeating: "Z", count: 65) + "\naaaa1111\nBBBB2222",
            codes: ["AAAA1111", "BBBB2222"], duplicates: [3, 5], invalid: [2, 4], header: nil),
        Case(name: "empty", text: "", codes: [], duplicates: [], invalid: [], header: nil),
    ]

    @Test(arguments: cases)
    func parses(_ c: Case) {
        let file = AppleCodeFile(parsing: c.text)
        #expect(file.codes == c.codes)
        #expect(file.duplicateLines == c.duplicates)
        #expect(file.invalidLines == c.invalid)
        #expect(file.headerLine == c.header)
    }

    @Test("appleOneTime campaigns: imported codes, one per customer, a reference name only for them")
    func campaignRules() throws {
        let campaign = try Campaign(
            id: "asc", offerId: "code1", kind: .appleOneTime, appleReferenceName: "Spring One-Time")
        #expect(campaign.kind.isClaimed && campaign.appleReferenceName == "Spring One-Time")
        #expect(throws: OfferDomainError.self) {
            try Campaign(id: "asc", offerId: "code1", kind: .appleOneTime, code: "X")
        }
        #expect(throws: OfferDomainError.self) {
            try Campaign(id: "asc", offerId: "code1", kind: .appleOneTime, perCustomerLimit: 2)
        }
        #expect(throws: OfferDomainError.self) {
            try Campaign(id: "c", offerId: "code1", kind: .oneTime, appleReferenceName: "Nope")
        }
        #expect(throws: OfferDomainError.self) {
            try Campaign(id: "c", offerId: "code1", kind: .appleOneTime, appleReferenceName: "")
        }
    }
}
