import Foundation

/// The human summary `offer-load` prints on stdout: aligned label/value rows, a latency table, errors by code,
/// and the invariant verdict (loud on a breach).
public enum SummaryRenderer {
    public static func render(_ r: RunReport) -> String {
        var rows: [(String, String)] = [
            ("scenario", r.scenario),
            ("model", r.model.text),
            ("targets", r.model.targets.joined(separator: ", ")),
            (
                "warm-up",
                "\(Format.fixed(r.model.warmupSeconds, digits: 1)) s (\(Format.number(r.warmupRequests)) "
                    + "requests excluded)"
            ),
            ("duration", "\(Format.fixed(r.measuredSeconds, digits: 2)) s measured"),
            (
                "requests",
                "\(Format.number(r.requests)) (\(Format.number(r.successes)) ok, "
                    + "\(Format.number(r.requests - min(r.requests, r.successes))) errors)"
            ),
            ("throughput", "\(Format.number(r.throughput)) req/s"),
        ]
        if let rate = r.model.rate, r.throughput < rate * 0.95 {
            rows.append(("", "below the target rate of \(Format.number(rate)) req/s"))
        }
        if let retries = r.retries {
            rows.append(
                (
                    "retried -32050",
                    "\(Format.number(retries.retriedRequests)) requests (\(Format.number(retries.unavailableAnswers)) "
                        + "answers), \(Format.number(retries.gaveUp)) gave up; longest wait "
                        + Format.micros(retries.longestWaitNanoseconds / 1_000)
                ))
        }
        if let cpu = r.cpu { rows.append(("cpu / 1k requests", cpu.text)) }
        var out = table(rows)
        out += "\nlatency (\(Format.number(r.latency.count)) samples, < 0.8 % bucket error)\n"
        let l = r.latency
        let header = ["min", "p50", "p90", "p99", "p99.9", "max", "mean"]
        let values =
            [l.minMicros, l.p50Micros, l.p90Micros, l.p99Micros, l.p999Micros, l.maxMicros].map {
                Format.micros($0)
            } + [Format.micros(l.meanMicros)]
        let widths = zip(header, values).map { max($0.count, $1.count) }
        out += "  " + zip(header, widths).map { pad($0, $1) }.joined(separator: "  ") + "\n"
        out += "  " + zip(values, widths).map { pad($0, $1) }.joined(separator: "  ") + "\n"
        if !r.errors.isEmpty {
            out += "\nerrors by code\n"
            out += table(
                r.errors.sorted { $0.key < $1.key }.map { ($0.key, Format.number($0.value)) }, rightAlign: true)
        }
        if let inv = r.invariants {
            if inv.passed {
                out += "\ninvariants: OK (\(inv.checked.count) checked)\n"
            } else {
                out += "\n!!! INVARIANT BREACH: \(inv.breaches.count) found !!!\n"
                for breach in inv.breaches { out += "  [\(breach.name)] \(breach.description)\n" }
                out += "exit status \(inv.exitStatus)\n"
            }
        }
        return out
    }

    private static func pad(_ s: String, _ width: Int) -> String {
        String(repeating: " ", count: max(0, width - s.count)) + s
    }

    private static func table(_ rows: [(String, String)], rightAlign: Bool = false) -> String {
        let width = rows.map(\.0.count).max() ?? 0
        let valueWidth = rows.map(\.1.count).max() ?? 0
        return rows.map { label, value in
            let left = label + String(repeating: " ", count: width - label.count)
            return "  \(left)  \(rightAlign ? pad(value, valueWidth) : value)\n"
        }.joined()
    }
}
