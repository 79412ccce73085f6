package suite

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
)

// Steady and Live mark unmeasured figures with NaN, which JSON cannot carry;
// in results.json they are null, and null reads back as NaN. Without this a
// run whose last scrape failed could not save any of its results.

type steadyFields Steady

// MarshalJSON writes NaN and ±Inf as null.
func (s Steady) MarshalJSON() ([]byte, error) { return marshalNaNAsNull(steadyFields(s)) }

// UnmarshalJSON reads null floats as NaN.
func (s *Steady) UnmarshalJSON(b []byte) error {
	var out steadyFields
	if err := unmarshalNullAsNaN(b, &out, "steady"); err != nil {
		return err
	}
	*s = Steady(out)
	return nil
}

type liveFields Live

// MarshalJSON writes NaN and ±Inf as null.
func (l Live) MarshalJSON() ([]byte, error) { return marshalNaNAsNull(liveFields(l)) }

// UnmarshalJSON reads null floats as NaN.
func (l *Live) UnmarshalJSON(b []byte) error {
	var out liveFields
	if err := unmarshalNullAsNaN(b, &out, "real-time leader"); err != nil {
		return err
	}
	*l = Live(out)
	return nil
}

// marshalNaNAsNull writes struct s's fields by name, a non-finite float as
// null.
func marshalNaNAsNull(s any) ([]byte, error) {
	v := reflect.ValueOf(s)
	m := make(map[string]any, v.NumField())
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		if f.Kind() == reflect.Float64 && (math.IsNaN(f.Float()) || math.IsInf(f.Float(), 0)) {
			m[name] = nil
			continue
		}
		m[name] = f.Interface()
	}
	return json.Marshal(m)
}

// unmarshalNullAsNaN fills the struct ptr points to by field name; a float
// that is null or missing (a figure an older run did not measure) is NaN.
func unmarshalNullAsNaN(b []byte, ptr any, what string) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("decode %s figures: %w", what, err)
	}
	v := reflect.ValueOf(ptr).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		msg, ok := raw[v.Type().Field(i).Name]
		if f.Kind() == reflect.Float64 && (!ok || string(msg) == "null") {
			f.SetFloat(math.NaN())
			continue
		}
		if !ok {
			continue
		}
		if err := json.Unmarshal(msg, f.Addr().Interface()); err != nil {
			return fmt.Errorf("decode %s figure %s: %w", what, v.Type().Field(i).Name, err)
		}
	}
	return nil
}
