/// The eight data masks and the penalty score that chooses among them (ISO/IEC 18004 §7.8).
extension QRCode {
    static func masks(_ mask: Int, x: Int, y: Int) -> Bool {
        switch mask {
        case 0: (x + y) % 2 == 0
        case 1: y % 2 == 0
        case 2: x % 3 == 0
        case 3: (x + y) % 3 == 0
        case 4: (x / 3 + y / 2) % 2 == 0
        case 5: x * y % 2 + x * y % 3 == 0
        case 6: (x * y % 2 + x * y % 3) % 2 == 0
        default: ((x + y) % 2 + x * y % 3) % 2 == 0
        }
    }

    /// Inverts the data modules the mask selects; applying it twice undoes it.
    mutating func applyMask(_ mask: Int) {
        for y in 0..<size {
            for x in 0..<size where !isFunction[y * size + x] && Self.masks(mask, x: x, y: y) {
                modules[y * size + x].toggle()
            }
        }
    }

    /// The penalty of the code with `mask` applied; the code is left as it was.
    func penalty(masked mask: Int, level: Level) -> Int {
        var trial = self
        trial.applyMask(mask)
        trial.drawFormatBits(level: level, mask: mask)
        return trial.penalty()
    }

    private func penalty() -> Int {
        var result = 0
        for line in 0..<size {
            result += linePenalty { modules[line * size + $0] }
            result += linePenalty { modules[$0 * size + line] }
        }
        for y in 0..<size - 1 {
            for x in 0..<size - 1 {
                let c = modules[y * size + x]
                if c == modules[y * size + x + 1] && c == modules[(y + 1) * size + x] && c == modules[(y + 1) * size + x + 1] {
                    result += 3
                }
            }
        }
        let dark = modules.count { $0 }
        let total = size * size
        let k = (abs(dark * 20 - total * 10) + total - 1) / total - 1
        return result + k * 10
    }

    /// Runs of five or more of one colour, and patterns that look like a finder's
    /// 1:1:3:1:1 with four light modules on one side, in one row or column.
    private func linePenalty(_ module: (Int) -> Bool) -> Int {
        var result = 0
        var colour = false
        var run = 0
        var history = [Int](repeating: 0, count: 7)
        func push(_ length: Int) {
            history.removeLast()
            history.insert(history[0] == 0 ? length + size : length, at: 0)  // the light border before the line
        }
        func finderLike() -> Int {
            let n = history[1]
            let core = n > 0 && history[2] == n && history[3] == n * 3 && history[4] == n && history[5] == n
            return (core && history[0] >= n * 4 && history[6] >= n ? 1 : 0) + (core && history[6] >= n * 4 && history[0] >= n ? 1 : 0)
        }
        for i in 0..<size {
            if module(i) == colour {
                run += 1
                if run == 5 { result += 3 } else if run > 5 { result += 1 }
            } else {
                push(run)
                if !colour { result += finderLike() * 40 }
                colour = module(i)
                run = 1
            }
        }
        if colour {
            push(run)
            run = 0
        }
        push(run + size)  // the light border after the line
        return result + finderLike() * 40
    }
}
