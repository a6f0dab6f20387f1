import Foundation
import OfferCrypto
import Synchronization
import Threads

/// B5 signing-layer benchmark: one shared `OfferSigner`, N dedicated threads signing as fast as they can for a
/// fixed time. Prints `sign format=<f> threads=<n> seconds=<s> signatures=<count> rate=<per wall second>
/// cpu_rate=<sum over threads of signatures per CPU second (user+sys)>`.
///
/// `cpu_rate` is comparable with `openssl speed`, which divides by CPU user time by default: on a shared machine it
/// is far less sensitive to other processes than the wall-clock rate.
enum SignBenchmark {
    struct Options {
        var seconds = 5.0
        var threads = 1
        var format = "v1"
    }

    static func parse(_ arguments: [String]) -> Options? {
        var options = Options()
        var iterator = arguments.makeIterator()
        while let argument = iterator.next() {
            guard let value = iterator.next() else { return nil }
            switch argument {
            case "--seconds":
                guard let seconds = Double(value), seconds > 0 else { return nil }
                options.seconds = seconds
            case "--threads":
                guard let threads = Int(value), (1...256).contains(threads) else { return nil }
                options.threads = threads
            case "--format":
                guard ["v1", "jws", "der"].contains(value) else { return nil }
                options.format = value
            default:
                return nil
            }
        }
        return options
    }

    /// Per-thread counts, written once by each thread when it finishes.
    final class Counts: Sendable {
        private struct State {
            var values: [Int] = []
            var cpuRates: [Double] = []
            var failures: [String] = []
        }
        private let state = Mutex(State())
        func add(_ value: Int, cpuSeconds: Double) {
            state.withLock {
                $0.values.append(value)
                $0.cpuRates.append(cpuSeconds > 0 ? Double(value) / cpuSeconds : 0)
            }
        }
        func fail(_ message: String) { state.withLock { $0.failures.append(message) } }
        var total: Int { state.withLock { $0.values.reduce(0, +) } }
        var cpuRate: Double { state.withLock { $0.cpuRates.reduce(0, +) } }
        var errors: [String] { state.withLock { $0.failures } }
    }

    /// CPU time (user + system) consumed by the calling thread.
    static func threadCPUSeconds() -> Double {
        var time = timespec()
        guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time) == 0 else { return 0 }
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    static func main(_ arguments: [String]) -> Int32 {
        guard let options = parse(arguments) else {
            FileHandle.standardError.write(
                Data("usage: offer-bench sign [--seconds S] [--threads N] [--format v1|jws]\n".utf8))
            return 64
        }
        let signer: OfferSigner
        do {
            signer = try OfferSigner(
                key: SigningKey.generate(), keyId: "BENCHKEY01",
                issuerId: "57246542-96fe-1a63-e053-0824d011072a", bundleId: "com.example.bench")
            // Sanity: what we time must be correct.
            let token = try signer.promotionalOfferJWS(productId: "com.example.monthly", offerId: "PROMO")
            guard try signer.key.publicKey.verifyJWS(compact: token) else {
                FileHandle.standardError.write(Data("offer-bench: self-check failed\n".utf8))
                return 1
            }
        } catch {
            FileHandle.standardError.write(Data("offer-bench: \(error)\n".utf8))
            return 1
        }

        let counts = Counts()
        let done = DispatchGroup()
        let start = DispatchTime.now().uptimeNanoseconds
        let deadline = start + UInt64(options.seconds * 1e9)
        let jws = options.format == "jws"
        let derOnly = options.format == "der"
        let fixedMessage = [UInt8](repeating: 0x5A, count: 111)
        for index in 0..<options.threads {
            done.enter()
            startThread(named: "sign-bench") {
                var count = 0
                let product = "com.example.monthly.\(index)"
                do {
                    outer: while true {
                        for _ in 0..<64 {
                            if derOnly {
                                _ = try signer.key.signatureDER(for: fixedMessage)
                            } else if jws {
                                _ = try signer.promotionalOfferJWS(
                                    productId: product, offerId: "PROMO",
                                    transactionId: "2000000123456789")
                            } else {
                                _ = try signer.signV1(
                                    productId: product, offerId: "PROMO",
                                    appAccountToken: "4a1b7c2d-0000-4000-8000-00000000abcd")
                            }
                        }
                        count += 64
                        if DispatchTime.now().uptimeNanoseconds >= deadline { break outer }
                    }
                } catch {
                    counts.fail("\(error)")
                }
                counts.add(count, cpuSeconds: threadCPUSeconds())
                done.leave()
            }
        }
        done.wait()
        let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if let failure = counts.errors.first {
            FileHandle.standardError.write(Data("offer-bench: signing failed: \(failure)\n".utf8))
            return 1
        }
        let total = counts.total
        let rate = Double(total) / elapsed
        print(
            "sign format=\(options.format) threads=\(options.threads) seconds=\(String(format: "%.2f", elapsed)) "
                + "signatures=\(total) rate=\(Int(rate.rounded())) cpu_rate=\(Int(counts.cpuRate.rounded()))")
        return 0
    }
}
