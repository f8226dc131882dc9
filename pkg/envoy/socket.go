package envoy

import (
	"context"
	"time"

	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// Reconnect backoff bounds for the Socket Mode loop (slack-go retries
// dropped connections itself; this covers the errors it gives up on).
const (
	socketBackoffMin = time.Second
	socketBackoffMax = 2 * time.Minute
)

// runSocket keeps a Socket Mode connection open until ctx ends. slack-go
// reconnects by itself when a socket drops or Slack asks it to; RunContext
// returns only on errors it considers fatal (bad token…), after which this
// loop waits with exponential backoff and starts over, so the envoy never
// stops listening while it runs. The runner's ticks keep the heartbeat
// fresh meanwhile.
func (e *Envoy) runSocket(ctx context.Context) {
	backoff := socketBackoffMin
	for ctx.Err() == nil {
		if _, _, err := e.web.identity(ctx); err != nil && ctx.Err() == nil {
			e.log.Warn("slack auth.test failed", "err", redact(err))
		}
		smc := socketmode.New(e.web.api, socketmode.OptionPingInterval(e.pingInterval))
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			e.consume(runCtx, smc)
		}()
		err := smc.RunContext(runCtx)
		cancel()
		<-done
		if ctx.Err() != nil {
			return
		}
		e.log.Warn("socket mode stopped, reconnecting", "err", redact(err), "wait", backoff)
		if e.sleep(ctx, backoff) != nil {
			return
		}
		backoff = min(backoff*2, socketBackoffMax)
	}
}

// consume reads the client's events until ctx ends.
func (e *Envoy) consume(ctx context.Context, smc *socketmode.Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case evt := <-smc.Events:
			switch evt.Type {
			case socketmode.EventTypeConnecting:
				e.log.Debug("socket mode connecting")
			case socketmode.EventTypeConnected:
				e.log.Info("socket mode connected")
			case socketmode.EventTypeConnectionError:
				e.log.Warn("socket mode connection error; slack-go retries")
			case socketmode.EventTypeInvalidAuth:
				e.log.Error("socket mode: invalid app token")
			case socketmode.EventTypeErrorBadMessage:
				e.log.Warn("socket mode: unreadable envelope skipped")
			case socketmode.EventTypeEventsAPI:
				e.onEventsAPI(ctx, smc, evt)
			case socketmode.EventTypeInteractive:
				e.onInteractive(ctx, smc, evt)
			case socketmode.EventTypeSlashCommand:
				e.ack(smc, evt)
			}
		}
	}
}

// onEventsAPI handles one events_api envelope: store the event, then ack,
// then the slow follow-ups (reaction, refusal). When the event cannot be
// stored the envelope is not acknowledged, so Slack delivers it again.
func (e *Envoy) onEventsAPI(ctx context.Context, smc *socketmode.Client, evt socketmode.Event) {
	api, ok := evt.Data.(slackevents.EventsAPIEvent)
	if !ok {
		e.ack(smc, evt)
		return
	}
	var eventID string
	if cb, ok := api.Data.(*slackevents.EventsAPICallbackEvent); ok {
		eventID = cb.EventID
	}
	var in Inbound
	switch d := api.InnerEvent.Data.(type) {
	case *slackevents.MessageEvent:
		in = Inbound{EventID: eventID, Kind: "message", Channel: d.Channel, ChannelType: d.ChannelType,
			User: d.User, BotID: d.BotID, SubType: d.SubType, Text: d.Text, TS: d.TimeStamp, ThreadTS: d.ThreadTimeStamp}
	case *slackevents.AppMentionEvent:
		in = Inbound{EventID: eventID, Kind: "app_mention", Channel: d.Channel, User: d.User, BotID: d.BotID,
			Text: d.Text, TS: d.TimeStamp, ThreadTS: d.ThreadTimeStamp}
	default:
		e.ack(smc, evt)
		return
	}
	f, err := e.handleInbound(ctx, in)
	if err != nil {
		e.log.Error("slack event not stored; leaving it for Slack to redeliver", "err", err)
		return
	}
	e.ack(smc, evt)
	e.doFollowUp(ctx, f)
}

// ack acknowledges an envelope that asks for it.
func (e *Envoy) ack(smc *socketmode.Client, evt socketmode.Event) {
	if evt.Request == nil {
		return
	}
	if err := smc.Ack(*evt.Request); err != nil {
		e.log.Warn("socket mode ack failed", "err", redact(err))
	}
}
