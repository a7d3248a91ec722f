package web

// Languages the UI speaks; the first is the default.
var Languages = []string{"zh", "en"}

// T returns the UI string key in lang, falling back to Chinese, then to the key itself
// (so a missing translation shows up in the page instead of vanishing).
func T(lang, key string) string {
	if s, ok := messages[key]; ok {
		if lang == "en" && s.en != "" {
			return s.en
		}
		return s.zh
	}
	return key
}

// HasLanguage reports whether lang is one the UI speaks.
func HasLanguage(lang string) bool {
	for _, l := range Languages {
		if l == lang {
			return true
		}
	}
	return false
}

type pair struct{ zh, en string }

// messages is the UI catalogue: one key per line, grouped by page and sorted within
// a group, so parallel additions merge cleanly. Every key needs both languages
// (TestCatalogue checks them and every key the templates and Go code use).
var messages = map[string]pair{
	// Every page: header, footer, punctuation
	"nav.course":   {"课程", "Course"},
	"nav.lang":     {"English", "中文"},
	"nav.login":    {"登录", "Log in"},
	"nav.logout":   {"退出", "Log out"},
	"nav.progress": {"学习进度", "Progress"},
	"nav.register": {"注册", "Register"},
	"nav.skip":     {"跳到正文", "Skip to content"},
	"punct.colon":  {"：", ": "},
	"punct.stop":   {"。", ". "},
	"site.tagline": {"多卡通信故障诊断与优化：在真实环境里学 NCCL、RDMA、PCIe 与 NVLink", "Diagnose and fix multi-GPU communication: learn NCCL, RDMA, PCIe and NVLink on real systems"},

	// Course index and chapter pages
	"course.begin":     {"从第一章开始", "Start with the first chapter"},
	"course.chapter":   {"第 %d 章", "Chapter %d"},
	"course.continue":  {"从上次的地方继续", "Continue where you left off"},
	"course.intro":     {"六个模块、三十章；每章配一个实验，在真实环境里注入故障，用真工具找出来。", "Six modules, thirty chapters; every chapter has a lab that breaks a real environment for you to diagnose with real tools."},
	"course.isread":    {"已标记为读完。", "Marked as read."},
	"course.isstudied": {"本章已学完", "You have studied this chapter"},
	"course.labs":      {"本章实验", "Labs for this chapter"},
	"course.labsdone":  {"实验全部通过", "labs passed"},
	"course.labsof":    {"实验 %d/%d", "labs %d/%d"},
	"course.loginhint": {"登录后可记录阅读进度与测验成绩。", "Log in to record your reading and quiz results."},
	"course.markread":  {"读完了，标记为已读", "I have read it: mark as read"},
	"course.module":    {"模块", "Module"},
	"course.next":      {"下一章", "Next"},
	"course.pager":     {"章节导航", "Chapter navigation"},
	"course.prev":      {"上一章", "Previous"},
	"course.quiz":      {"测验通过", "quiz passed"},
	"course.read":      {"已读", "read"},
	"course.studied":   {"已学", "studied"},
	"course.toc":       {"本章目录", "On this page"},
	"course.wip":       {"编写中", "not yet written"},
	"course.zhonly":    {"课程正文目前只有中文。", "The course text is in Chinese for now; menus, buttons and messages are in English."},

	// Chapter quiz and its result page
	"next.lab":      {"做本章实验", "Do the chapter's lab"},
	"next.reread":   {"回到正文复习", "Reread the chapter"},
	"next.retry":    {"修改答案再交一次", "Change your answers and submit again"},
	"next.title":    {"下一步", "Next steps"},
	"quiz.failed":   {"未通过（需要 %s）", "Not passed (needs %s)"},
	"quiz.last":     {"上次提交：", "Your last submission:"},
	"quiz.login":    {"登录后提交测验，成绩会记入学习进度。", "Log in to submit the quiz and record your score."},
	"quiz.multiple": {"（多选）", "(select all that apply)"},
	"quiz.numeric":  {"填入数值", "Enter a number"},
	"quiz.passed":   {"通过", "Passed"},
	"quiz.resubmit": {"修改后重新提交", "Submit again"},
	"quiz.result":   {"测验结果", "Quiz result"},
	"quiz.right":    {"正确", "Right"},
	"quiz.score":    {"得分", "Score"},
	"quiz.submit":   {"提交答案", "Submit answers"},
	"quiz.title":    {"本章测验", "Chapter quiz"},
	"quiz.wrong":    {"错误", "Wrong"},

	// Progress page
	"progress.attempts":   {"已尝试 %d 次", "%d attempts"},
	"progress.chapter":    {"章节", "Chapter"},
	"progress.labs":       {"实验", "Labs"},
	"progress.notstarted": {"未开始", "not started"},
	"progress.quiz":       {"测验", "Quiz"},
	"progress.summary":    {"已学 %d / %d 章，测验通过 %d 个，实验通过 %d / %d 个", "%d of %d chapters studied, %d quizzes passed, %d of %d labs passed"},
	"progress.title":      {"学习进度", "Your progress"},

	// Login and registration
	"auth.email":        {"邮箱", "Email"},
	"auth.hasaccount":   {"已有账号？", "Already registered?"},
	"auth.login":        {"登录", "Log in"},
	"auth.name":         {"显示名称", "Display name"},
	"auth.noaccount":    {"还没有账号？", "No account yet?"},
	"auth.password":     {"密码", "Password"},
	"auth.password.min": {"（至少 10 个字符）", "(at least 10 characters)"},
	"auth.register":     {"注册账号", "Create account"},

	// Error pages and messages
	"err.badform":      {"表单格式不正确：%s", "Malformed form: %s"},
	"err.exists":       {"这个邮箱已经注册过，请直接登录。", "This email is already registered: log in instead."},
	"err.internal":     {"服务器内部错误，已记录日志。请稍后重试。", "Internal error (logged). Please try again later."},
	"err.labbusy":      {"你已经有一个实验在运行：先完成或停止它。", "You already have a lab running: finish or stop it first."},
	"err.labcannot":    {"这台主机不能运行这个实验：%s", "This host cannot run this lab: %s"},
	"err.labnotready":  {"实验尚未就绪或已经结束。", "The lab is not ready, or it has ended."},
	"err.labsoff":      {"这台服务器上的实验没有启用：%s", "Labs are off on this server: %s"},
	"err.login":        {"邮箱或密码不正确。", "Wrong email or password."},
	"err.needlogin":    {"请先登录。", "Please log in first."},
	"err.nobundle":     {"实验页面暂不可用：这个程序构建时没有嵌入浏览器脚本包。请管理员用 make build 重新构建。（%s）", "Lab pages are unavailable: this binary was built without its browser bundle. Ask the administrator to rebuild with make build. (%s)"},
	"err.nolab":        {"没有这个实验（或它不属于你）。", "No such lab (or it is not yours)."},
	"err.notfound":     {"没有这个页面。", "There is no such page."},
	"err.ratelimit":    {"尝试次数太多，请 %s 秒后再试。", "Too many attempts: try again in %s s."},
	"err.toolarge":     {"提交的内容太大（上限 %s KiB）。", "The form is too large (limit %s KiB)."},
	"err.toomanyterms": {"打开的终端太多（上限 %s 个）：关掉一些标签页。", "Too many open terminals (limit %s): close some tabs."},
	"err.wip":          {"这一章还在编写中，暂时没有内容。", "This chapter is still being written."},
	"error.back":       {"返回课程目录", "Back to the course"},
	"error.title":      {"出错了", "Something went wrong"},

	// Lab pages
	"crit.class":         {"故障类型", "Fault class"},
	"crit.evidence":      {"证据", "Evidence"},
	"crit.hints":         {"提示扣分", "Hints used"},
	"crit.location":      {"位置", "Location"},
	"crit.remediation":   {"修复（重新测量）", "Fix (measured again)"},
	"lab.again":          {"再做一次（新的变体）", "Try again (a new variant)"},
	"lab.answer":         {"提交诊断", "Submit your diagnosis"},
	"lab.chapter":        {"所属章节", "Chapter"},
	"lab.chart":          {"工作负载 %s（GB/s），红线为故障事件", "Workload %s (GB/s); red lines are fault events"},
	"lab.class":          {"故障类型", "Fault class"},
	"lab.debrief":        {"复盘", "Debrief"},
	"lab.ended":          {"实验已结束，终端已关闭。", "The lab has ended; the terminal is closed."},
	"lab.env":            {"实验环境", "Environment"},
	"lab.evidence":       {"证据：从你自己终端里执行过的命令中选择", "Evidence: pick commands you ran in your own terminals"},
	"lab.evidence.none":  {"还没有记录到命令。在终端里执行命令后点“刷新”。", "No commands recorded yet. Run commands in a terminal, then refresh."},
	"lab.expires":        {"剩余时间", "Time left"},
	"lab.failed":         {"实验未能启动", "The lab could not start"},
	"lab.failedhelp":     {"这不计入你的成绩。请重新开始；如果一直失败，请把上面的原因告诉管理员。", "This does not count against you. Start it again; if it keeps failing, tell an administrator the reason above."},
	"lab.fixfirst":       {"评分时会重新测量 busbw：如果你已经修复了故障，先保持修复状态再提交。", "Grading measures busbw again: if you fixed the fault, leave the fix in place when you submit."},
	"lab.grading":        {"评分中：正在重新测量并核对证据……", "Grading: measuring again and checking the evidence…"},
	"lab.hint.open":      {"打开提示 %s（扣 %s）", "Open hint %s (costs %s)"},
	"lab.hints":          {"提示", "Hints"},
	"lab.idleclosed":     {"30 分钟没有输入，终端连接已断开；刷新页面可重新连接。", "No input for 30 minutes: disconnected. Reload to reconnect."},
	"lab.idlewarn":       {"25 分钟没有输入：再过 5 分钟将断开连接。", "No input for 25 minutes: disconnecting in 5 minutes."},
	"lab.injected":       {"注入的故障（等价命令）", "What was injected (equivalent command)"},
	"lab.needsgpu":       {"这个实验需要 GPU 节点。", "This lab needs a GPU node."},
	"lab.notpassed":      {"未通过", "Not passed"},
	"lab.passed":         {"通过", "Passed"},
	"lab.refresh":        {"刷新", "Refresh"},
	"lab.result":         {"评分结果", "Result"},
	"lab.resume":         {"回到正在运行的实验", "Back to your running lab"},
	"lab.start":          {"开始实验", "Start the lab"},
	"lab.starting":       {"实验正在启动……", "The lab is starting…"},
	"lab.state.expired":  {"实验已超时结束，故障已撤销。", "The lab timed out; its faults were reverted."},
	"lab.state.stopped":  {"实验已停止，故障已撤销。", "The lab was stopped; its faults were reverted."},
	"lab.stop":           {"停止实验", "Stop the lab"},
	"lab.stop.confirm":   {"停止后故障会被撤销、环境会被删除。确定？", "Stopping reverts the faults and removes the environment. Sure?"},
	"lab.submit":         {"提交并评分（会结束实验）", "Submit and grade (ends the lab)"},
	"lab.submit.confirm": {"提交后实验会结束并撤销故障。确定提交？", "Submitting ends the lab and reverts the faults. Submit?"},
	"lab.task":           {"任务", "Task"},
	"lab.terminals":      {"终端", "Terminals"},
	"lab.where":          {"位置", "Location"},
	"where.gpu":          {"GPU", "GPU"},
	"where.gpu.eg":       {"如 GPU1（GPU 实验）", "e.g. GPU1 (GPU labs)"},
	"where.nic":          {"网卡", "NIC"},
	"where.nic.eg":       {"如 rdma0", "e.g. rdma0"},
	"where.node":         {"节点", "Node"},
	"where.node.eg":      {"如 node2", "e.g. node2"},
	"where.port":         {"交换机端口", "Switch port"},
	"where.port.eg":      {"填它所连的节点，如 node1", "the node it faces, e.g. node1"},

	// explain page (server/explainpage.go)
	"explain.title":      {"NCCL 日志诊断", "NCCL log diagnosis"},
	"explain.intro":      {"粘贴故障现场的输出：NCCL_DEBUG 日志（有无 host:pid:tid 前缀都行）、PyTorch 报错、nccl-tests 输出、dmesg、ibstat 等，可以混在一起。", "Paste what the failure printed: NCCL_DEBUG logs (with or without the host:pid:tid prefix), PyTorch errors, nccl-tests output, dmesg, ibstat and the like, mixed in any order."},
	"explain.paste":      {"日志文本", "Log text"},
	"explain.upload":     {"或上传文件（上限 %d KiB）", "or upload a file (limit %d KiB)"},
	"explain.submit":     {"诊断", "Diagnose"},
	"explain.toolarge":   {"输入有 %d KiB，超过上限 %d KiB：请只粘贴出错前后的部分。", "The input is %d KiB, over the %d KiB limit: paste the part around the first error."},
	"explain.empty":      {"没有内容：请粘贴日志或选择文件。", "Nothing to read: paste a log or choose a file."},
	"explain.unreadable": {"上传的文件读不出来。", "The uploaded file could not be read."},
	"explain.symptom":    {"症状", "Symptom"},
	"explain.read":       {"读了 %d 行、%d 字节", "%d lines, %d bytes read"},
	"explain.binary":     {"没有按文本读", "Not read as text"},
	"explain.causes":     {"可能的原因（按可能性排序）", "Likely causes, most likely first"},
	"explain.why":        {"依据", "Why"},
	"explain.next":       {"下一步要跑的命令", "Commands to run next"},
	"explain.evidence":   {"依据的输入行", "Lines it rests on"},
	"explain.line":       {"行", "Line"},
	"explain.says":       {"含义", "Meaning"},
	"explain.versions":   {"此写法出现在", "This form is printed by"},
	"explain.also":       {"同时出现", "Also seen"},
	"explain.needs":      {"要得到更确定的结论，还需要", "For a firmer verdict, add"},
	"explain.chapters":   {"讲这个症状的章节", "Chapters that teach this symptom"},

	// Security and limits (issue 18: server/account.go, server/labpages.go)
	"sec.hostfull": {"服务器上的实验名额现在都被其他学员占用了，请过几分钟再开始这个实验。",
		"Every lab place on this server is in use by other learners right now; please start this lab again in a few minutes."},
	"sec.weakpassword": {"这个密码太容易被猜到（常见密码、单词加数字、重复或连续字符、邮箱或姓名）。请换一个更长、更少见的密码，例如几个不相关的词。",
		"This password is too easy to guess (a common password, a word with digits, repeated or sequential characters, your email or name). Choose a longer, less common one, e.g. a few unrelated words."},
}
