package server

import (
	"fmt"
	"strings"

	"github.com/commlab/commlab/labs/session"
	"github.com/commlab/commlab/web"
)

// queueText says in lang where a lab waiting in a batch queue stands: its
// position, and squeue's reason code with what it means for the learner.
func queueText(lang string, q *session.Queue) string {
	if q == nil {
		return ""
	}
	code := reasonCode(q.Reason)
	why := web.T(lang, "lab.queue.why."+queueReasonKey(code))
	if q.Position > 0 {
		return fmt.Sprintf(web.T(lang, "lab.queue.position"), q.Position, code, why)
	}
	return fmt.Sprintf(web.T(lang, "lab.queue.waiting"), code, why)
}

// reasonCode is squeue's reason without the details some codes carry
// ("ReqNodeNotAvail, UnavailableNodes:node3"): node names are the site's.
func reasonCode(reason string) string {
	code, _, _ := strings.Cut(reason, ",")
	if code = strings.TrimSpace(code); code == "" {
		return "None"
	}
	return code
}

// queueReasons are the squeue reason codes (Slurm's job_reason_codes) a
// learner may meet, by their explanation's catalogue key (lab.queue.why.KEY).
var queueReasons = map[string]string{
	"None":              "none",
	"Resources":         "resources",
	"Priority":          "priority",
	"Reservation":       "reservation",
	"ReqNodeNotAvail":   "nodes",
	"NodeDown":          "nodes",
	"BeginTime":         "begintime",
	"Dependency":        "dependency",
	"JobHeldUser":       "held",
	"JobHeldAdmin":      "held",
	"PartitionDown":     "partition",
	"PartitionInactive": "partition",
	"AccountingPolicy":  "limit",
}

// queueReasonKey is code's explanation key: the per-QOS, per-association and
// per-partition limits share one; an unknown code gets the general one.
func queueReasonKey(code string) string {
	if k, ok := queueReasons[code]; ok {
		return k
	}
	for _, p := range []string{"QOS", "Assoc", "Max", "Partition"} {
		if strings.HasPrefix(code, p) {
			return "limit"
		}
	}
	return "other"
}
