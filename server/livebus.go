package server

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// liveChannel is the PostgreSQL channel that carries workshop changes between
// replicas. A payload is only the workshop id: what changed is read from the
// store, with the same rules as any live frame, so nothing secret travels.
const liveChannel = "commlab_workshop_changed"

// liveBus shares live.changed between the replicas that use one PostgreSQL
// database: publish NOTIFYs, and listen re-emits every notice to this replica's
// hub. Without a pool (SQLite) it is in-process only.
type liveBus struct {
	pool *pgxpool.Pool
	hub  *liveHub
	log  *slog.Logger
}

// publish wakes this replica at once and, through PostgreSQL, the others. A
// failed NOTIFY is logged: the others still catch up on their 2 s tick.
func (b *liveBus) publish(ctx context.Context, workshop int64) {
	b.hub.changed(workshop)
	if b.pool == nil {
		return
	}
	if _, err := b.pool.Exec(context.WithoutCancel(ctx), "SELECT pg_notify($1, $2)", liveChannel, strconv.FormatInt(workshop, 10)); err != nil {
		b.log.Warn("live event not shared", "workshop", workshop, "err", err)
	}
}

// listen re-emits notices until ctx is done, reconnecting after a lost
// connection. Every view also re-reads on a timer, so a notice missed while
// reconnecting delays a frame and loses nothing.
func (b *liveBus) listen(ctx context.Context) {
	if b.pool == nil {
		return
	}
	for backoff := 100 * time.Millisecond; ctx.Err() == nil; {
		err := b.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		b.log.Warn("live listener reconnecting", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (b *liveBus) listenOnce(ctx context.Context) error {
	conn, err := b.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The LISTEN belongs to this connection: drop it rather than return it.
	pc := conn.Hijack()
	defer pc.Close(context.WithoutCancel(ctx))
	if _, err := pc.Exec(ctx, "LISTEN "+liveChannel); err != nil {
		return err
	}
	for {
		n, err := pc.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if id, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
			b.hub.changed(id)
		}
	}
}
