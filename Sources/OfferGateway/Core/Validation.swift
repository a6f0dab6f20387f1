import Foundation
import OfferDomain

/// Checks of client-sent values that the domain does not own, each failing with -32602 naming the param.
enum Validate {
    /// A normalised customer id (UUIDs lowercased, so they compare case-insensitively).
    static func customerId(_ raw: String, param: String = "params.customerId") throws -> String {
        do {
            return try CustomerID.normalize(raw)
        } catch {
            throw GatewayError.invalidParams(param: param, message: error.message, reason: error.code.rawValue)
        }
    }

    /// An identifier chosen by the app (product, offer, group, campaign, key, transaction id): 1-200 bytes, no
    /// control characters.
    static func identifier(_ raw: String, param: String, maxBytes: Int = 200) throws -> String {
        guard !raw.isEmpty, raw.utf8.count <= maxBytes else {
            throw GatewayError.invalidParams(
                param: param, message: "\(Self.name(param)) must be 1-\(maxBytes) bytes", reason: "invalid_value")
        }
        guard !raw.hasControlCharacters else {
            throw GatewayError.invalidParams(
                param: param, message: "\(Self.name(param)) has control characters", reason: "invalid_value")
        }
        return raw
    }

    /// A lowercase UUID string.
    static func uuid(_ raw: String, param: String) throws -> String {
        guard CustomerID.isUUIDShaped(raw) else {
            throw GatewayError.invalidParams(
                param: param, message: "\(Self.name(param)) must be a UUID", reason: "invalid_value")
        }
        return raw.lowercased()
    }

    /// A billing plan as API.md §3 spells it: `upFront` or `monthly` (exactly).
    static func billingPlan(_ raw: String, param: String = "params.billingPlan") throws -> BillingPlan {
        guard let plan = BillingPlan(rawValue: raw) else {
            throw GatewayError.invalidParams(
                param: param, message: "\(Self.name(param)) must be upFront or monthly", reason: "invalid_value")
        }
        return plan
    }

    /// A locale identifier such as `en_US`, `de-DE` or `ja_JP`.
    static func locale(_ raw: String?, param: String = "params.locale") throws -> Locale {
        guard let raw else { return Locale(identifier: "en_US") }
        let parts = raw.split(separator: "_", omittingEmptySubsequences: false).flatMap {
            $0.split(separator: "-", omittingEmptySubsequences: false)
        }
        let valid =
            (2...3).contains(parts.first?.count ?? 0)
            && parts.allSatisfy { part in
                (2...8).contains(part.count)
                    && part.unicodeScalars.allSatisfy {
                        $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0)
                    }
            }
        guard valid else {
            throw GatewayError.invalidParams(
                param: param, message: "locale must look like en_US or de-DE", reason: "invalid_value")
        }
        return Locale(identifier: raw.replacingOccurrences(of: "-", with: "_"))
    }

    /// A client-sent name, shortened and stripped of control characters, for messages.
    static func printable(_ text: String) -> String {
        let kept = text.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }.prefix(64)
        let cleaned = String(String.UnicodeScalarView(kept))
        return text.unicodeScalars.count > 64 ? cleaned + "…" : cleaned
    }

    private static func name(_ param: String) -> String {
        param.split(separator: ".").last.map(String.init) ?? param
    }
}
