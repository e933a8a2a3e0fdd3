package slackstub

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Paths of the bot's endpoints, relative to the URL given to SlashCommand
// and Click.
const (
	CommandsPath     = "/slack/commands"
	InteractionsPath = "/slack/interactions"
)

// Sign returns Slack's X-Slack-Signature for body sent at ts (Unix
// seconds): "v0=" + hex(HMAC-SHA256(secret, "v0:" + ts + ":" + body)).
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(mac, "v0:%d:", ts)
	mac.Write(body)
	return "v0=" + hex.EncodeToString(mac.Sum(nil))
}

// NewRequest returns a POST of body to url signed like Slack at time at;
// with a zero at it is signed now (Stub.Now).
func (s *Stub) NewRequest(url, contentType string, body []byte, at time.Time) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	if at.IsZero() {
		at = s.Now()
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(at.Unix(), 10))
	req.Header.Set("X-Slack-Signature", Sign(s.secret, at.Unix(), body))
	return req, nil
}

// Post sends body to url signed like Slack at time at (zero: now).
func (s *Stub) Post(url, contentType string, body []byte, at time.Time) (*http.Response, error) {
	req, err := s.NewRequest(url, contentType, body, at)
	if err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

const formType = "application/x-www-form-urlencoded"

// CommandForm returns the form Slack posts for a slash command, with a
// fresh response_url that records what the bot posts to it.
func (s *Stub) CommandForm(command, text, user, channel string) url.Values {
	return url.Values{
		"token":        {"legacy-verification-token"},
		"team_id":      {TeamID},
		"team_domain":  {"stub"},
		"channel_id":   {channel},
		"channel_name": {strings.ToLower(channel)},
		"user_id":      {user},
		"user_name":    {strings.ToLower(user)},
		"command":      {command},
		"text":         {text},
		"api_app_id":   {AppID},
		"response_url": {s.newResponseURL(user, channel, "")},
		"trigger_id":   {s.triggerID()},
	}
}

// SlashCommand posts a signed slash command to the bot at botURL +
// CommandsPath, as Slack would.
func (s *Stub) SlashCommand(botURL, command, text, user, channel string) (*http.Response, error) {
	form := s.CommandForm(command, text, user, channel)
	return s.Post(botURL+CommandsPath, formType, []byte(form.Encode()), time.Time{})
}

// Click posts a signed block_actions interaction to the bot at botURL +
// InteractionsPath: user clicked the button actionID with value on the
// message messageTS in channel.
func (s *Stub) Click(botURL, actionID, value, user, channel, messageTS string) (*http.Response, error) {
	payload, err := s.ClickPayload(actionID, value, user, channel, messageTS)
	if err != nil {
		return nil, err
	}
	return s.PostPayload(botURL, payload, time.Time{})
}

// PostPayload posts an interaction payload (form field "payload") to
// botURL + InteractionsPath, signed at time at (zero: now).
func (s *Stub) PostPayload(botURL string, payload []byte, at time.Time) (*http.Response, error) {
	form := url.Values{"payload": {string(payload)}}
	return s.Post(botURL+InteractionsPath, formType, []byte(form.Encode()), at)
}

// ClickPayload builds the block_actions payload Slack sends when user
// clicks the button actionID with value on the message messageTS in
// channel: with the container, the message as it stands (blocks
// included), a fresh response_url and a trigger_id. The button's block_id
// is looked up in the message's blocks; the message need not exist.
func (s *Stub) ClickPayload(actionID, value, user, channel, messageTS string) ([]byte, error) {
	responseURL := s.newResponseURL(user, channel, messageTS)
	s.mu.Lock()
	m, ok := s.byTS[channel+"/"+messageTS]
	var msg obj
	blockID, label := "", actionID
	if ok && !m.deleted {
		msg = s.messageJSON(m)
		blockID, label = findButton(m.RawBlocks, actionID, value)
	}
	s.mu.Unlock()
	now := s.Now()
	actionTS := fmt.Sprintf("%d.%06d", now.Unix(), now.Nanosecond()/1000)
	container := obj{"type": "message", "message_ts": messageTS, "channel_id": channel, "is_ephemeral": false}
	if msg != nil {
		if th, _ := msg["thread_ts"].(string); th != "" {
			container["thread_ts"] = th
		}
	} else {
		msg = obj{"type": "message", "ts": messageTS, "text": "", "blocks": []any{}}
	}
	p := obj{
		"type":         "block_actions",
		"user":         obj{"id": user, "username": strings.ToLower(user), "name": strings.ToLower(user), "team_id": TeamID},
		"api_app_id":   AppID,
		"token":        "legacy-verification-token",
		"container":    container,
		"trigger_id":   s.triggerID(),
		"team":         obj{"id": TeamID, "domain": "stub"},
		"enterprise":   nil,
		"channel":      obj{"id": channel, "name": strings.ToLower(channel)},
		"message":      msg,
		"state":        obj{"values": obj{}},
		"response_url": responseURL,
		"actions": []obj{{
			"action_id": actionID,
			"block_id":  blockID,
			"text":      obj{"type": "plain_text", "text": label, "emoji": true},
			"value":     value,
			"type":      "button",
			"action_ts": actionTS,
		}},
	}
	return json.Marshal(p)
}

func (s *Stub) triggerID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%d.%s.%032x", s.nextID(), TeamID, s.seq)
}

// findButton returns the block_id and label of the button actionID (with
// value, when several share the action id) in raw blocks.
func findButton(raw json.RawMessage, actionID, value string) (blockID, label string) {
	var blocks []struct {
		BlockID  string `json:"block_id"`
		Elements []struct {
			ActionID string `json:"action_id"`
			Value    string `json:"value"`
			Text     struct {
				Text string `json:"text"`
			} `json:"text"`
		} `json:"elements"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return "", actionID
	}
	for _, b := range blocks {
		for _, e := range b.Elements {
			if e.ActionID == actionID && (value == "" || e.Value == value) {
				return b.BlockID, e.Text.Text
			}
		}
	}
	return "", actionID
}
