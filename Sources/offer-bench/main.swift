// offer-bench: micro-benchmarks of single layers, driven by ops/bench scripts. Not shipped.
//
//   offer-bench sign [--seconds S] [--threads N] [--format v1|jws]
//   offer-bench best [--seconds S] [--plain | --rank | --compare]
//
// Usage errors exit 64; stdout carries one machine-readable result line per run.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
guard let mode = arguments.first else {
    FileHandle.standardError.write(Data("usage: offer-bench sign [--seconds S] [--threads N] [--format v1|jws]\n".utf8))
    exit(64)
}
switch mode {
case "sign":
    exit(SignBenchmark.main(Array(arguments.dropFirst())))
case "best":
    exit(DomainBenchmark.main(Array(arguments.dropFirst())))
default:
    FileHandle.standardError.write(Data("offer-bench: unknown mode '\(mode)'\n".utf8))
    exit(64)
}
