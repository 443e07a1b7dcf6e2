/// Percentiles over recorded latencies, in microseconds.
struct LatencySummary {
    var count: Int
    var p50: Double
    var p90: Double
    var p99: Double
    var mean: Double

    init(nanos: [UInt64]) {
        let sorted = nanos.sorted()
        count = sorted.count
        func at(_ q: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let i = min(sorted.count - 1, Int((Double(sorted.count) * q).rounded(.down)))
            return Double(sorted[i]) / 1000
        }
        p50 = at(0.50)
        p90 = at(0.90)
        p99 = at(0.99)
        mean = sorted.isEmpty ? 0 : Double(sorted.reduce(0, +)) / Double(sorted.count) / 1000
    }
}

/// A flat JSON object writer: the benchmark's output is read by scripts/bench.
struct JSONLine {
    private var parts: [String] = []

    mutating func add(_ key: String, _ value: Int) { parts.append("\"\(key)\":\(value)") }
    mutating func add(_ key: String, _ value: Double) {
        parts.append("\"\(key)\":\(value.isFinite ? String((value * 1000).rounded() / 1000) : "null")")
    }
    mutating func add(_ key: String, _ value: String) { parts.append("\"\(key)\":\"\(value)\"") }
    mutating func add(_ key: String, _ values: [Double]) {
        parts.append("\"\(key)\":[" + values.map { String(($0 * 1000).rounded() / 1000) }.joined(separator: ",") + "]")
    }

    var text: String { "{" + parts.joined(separator: ",") + "}" }
}
