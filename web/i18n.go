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

var messages = map[string]pair{
	"site.tagline":      {"多卡通信故障诊断与优化：在真实环境里学 NCCL、RDMA、PCIe 与 NVLink", "Diagnose and fix multi-GPU communication: learn NCCL, RDMA, PCIe and NVLink on real systems"},
	"nav.course":        {"课程", "Course"},
	"nav.progress":      {"学习进度", "Progress"},
	"nav.login":         {"登录", "Log in"},
	"nav.register":      {"注册", "Register"},
	"nav.logout":        {"退出", "Log out"},
	"nav.lang":          {"English", "中文"},
	"nav.skip":          {"跳到正文", "Skip to content"},
	"course.module":     {"模块", "Module"},
	"course.chapter":    {"第 %d 章", "Chapter %d"},
	"course.wip":        {"编写中", "in progress"},
	"course.read":       {"已读", "read"},
	"course.quiz":       {"测验通过", "quiz passed"},
	"course.lab":        {"实验通过", "lab passed"},
	"course.toc":        {"本章目录", "On this page"},
	"course.prev":       {"上一章", "Previous"},
	"course.next":       {"下一章", "Next"},
	"course.markread":   {"标记为已读", "Mark as read"},
	"course.isread":     {"本章已读", "You have read this chapter"},
	"course.loginhint":  {"登录后可记录阅读进度与测验成绩。", "Log in to record your reading and quiz results."},
	"course.labs":       {"本章实验", "Labs for this chapter"},
	"quiz.title":        {"本章测验", "Chapter quiz"},
	"quiz.submit":       {"提交答案", "Submit answers"},
	"quiz.right":        {"正确", "Right"},
	"quiz.wrong":        {"错误", "Wrong"},
	"quiz.score":        {"得分", "Score"},
	"quiz.passed":       {"通过", "Passed"},
	"quiz.failed":       {"未通过（需要 %s）", "Not passed (needs %s)"},
	"quiz.numeric":      {"填入数值", "Enter a number"},
	"quiz.multiple":     {"多选", "Select all that apply"},
	"auth.email":        {"邮箱", "Email"},
	"auth.name":         {"显示名称", "Display name"},
	"auth.password":     {"密码", "Password"},
	"auth.password.min": {"至少 10 个字符", "at least 10 characters"},
	"auth.login":        {"登录", "Log in"},
	"auth.register":     {"注册账号", "Create account"},
	"auth.noaccount":    {"还没有账号？", "No account yet?"},
	"auth.hasaccount":   {"已有账号？", "Already registered?"},
	"progress.title":    {"学习进度", "Your progress"},
	"progress.summary":  {"已读 %d / %d 章，测验通过 %d，实验通过 %d", "%d of %d chapters read, %d quizzes and %d labs passed"},
	"error.title":       {"出错了", "Something went wrong"},
	"error.back":        {"返回课程目录", "Back to the course"},
	"err.notfound":      {"没有这个页面。", "There is no such page."},
	"err.wip":           {"这一章还在编写中，暂时没有内容。", "This chapter is still being written."},
	"err.login":         {"邮箱或密码不正确。", "Wrong email or password."},
	"err.exists":        {"这个邮箱已经注册过，请直接登录。", "This email is already registered: log in instead."},
	"err.ratelimit":     {"尝试次数太多，请 %s 秒后再试。", "Too many attempts: try again in %s s."},
	"err.toolarge":      {"提交的内容太大（上限 %s KiB）。", "The form is too large (limit %s KiB)."},
	"err.badform":       {"表单格式不正确：%s", "Malformed form: %s"},
	"err.needlogin":     {"请先登录。", "Please log in first."},
	"err.internal":      {"服务器内部错误，已记录日志。请稍后重试。", "Internal error (logged). Please try again later."},
	"quiz.login":        {"登录后提交测验，成绩会记入学习进度。", "Log in to submit the quiz and record your score."},
}
