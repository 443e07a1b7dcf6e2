/// How many questions (`confirm` rules', the trust question) may wait on the desktop at
/// once: at most `perProgram` for one program (``ProgramShare``) and `total` for all, the
/// program's own cap checked first. A program that opens connection after connection
/// (each would ask) fills its own share only, so another program's first question is
/// still shown; the total keeps the desktop from being flooded by many programs.
/// A value: its owner (`DesktopNotifier`) keeps it under its lock.
public struct QuestionShares: Sendable {
    public static let perProgram = 2
    public static let total = 8

    public let perProgram: Int
    public let total: Int
    private var open: [ProgramShare?: Int] = [:]
    private var count = 0

    public init(perProgram: Int = Self.perProgram, total: Int = Self.total) {
        self.perProgram = perProgram
        self.total = total
    }

    /// Takes a place for a question of `program` (nil: not known, all such share one), or
    /// says why there is none: `.programBusy` when the program has its share waiting,
    /// `.busy` when all of them wait.
    public mutating func take(for program: ProgramShare?) -> ConfirmAnswer? {
        let mine = open[program, default: 0]
        guard mine < perProgram else { return .programBusy(perProgram) }
        guard count < total else { return .busy(total) }
        open[program] = mine + 1
        count += 1
        return nil
    }

    /// Gives back the place `take(for:)` gave.
    public mutating func give(back program: ProgramShare?) {
        guard let mine = open[program], mine > 0 else { return }
        open[program] = mine == 1 ? nil : mine - 1
        count -= 1
    }

    /// Questions waiting now, of all programs.
    public var waiting: Int { count }

    /// Questions of `program` waiting now.
    public func waiting(of program: ProgramShare?) -> Int { open[program, default: 0] }
}
