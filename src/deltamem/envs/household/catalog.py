"""The household world as data: receptacles, object types, room layouts and the split partition.

Everything the generator may put in a game is declared here, so the partition between
splits can be read (and tested) without generating anything:

* ``train`` and ``seen`` share :data:`SEEN_LAYOUTS` and :data:`SEEN_OBJECTS`
  (they differ only by the instances drawn, like ALFWorld's train / valid_seen);
* ``unseen`` uses :data:`UNSEEN_LAYOUTS` and :data:`UNSEEN_OBJECTS`, which share no
  layout and no movable object type with the other two (a stricter shift than
  ALFWorld's valid_unseen, which only changes the rooms).

Receptacle types and the two lamps (:data:`LAMPS`) are fixtures that every split may
use: a kitchen always has a fridge. Names are ALFWorld's PDDL type names
(``CounterTop`` is shown to the agent as ``countertop``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "APPLIANCE",
    "LAMPS",
    "LAYOUTS",
    "OBJECTS",
    "PROPERTY",
    "RECEPTACLES",
    "ROOMS",
    "SEEN_LAYOUTS",
    "SEEN_OBJECTS",
    "SPLITS",
    "TASK_TYPES",
    "UNSEEN_LAYOUTS",
    "UNSEEN_OBJECTS",
    "Layout",
    "ObjectType",
    "layouts_for",
    "objects_for",
]

#: the six ALFWorld task types, in ALFWorld's numbering order
TASK_TYPES: tuple[str, ...] = (
    "pick_and_place_simple",
    "look_at_obj_in_light",
    "pick_clean_then_place_in_recep",
    "pick_heat_then_place_in_recep",
    "pick_cool_then_place_in_recep",
    "pick_two_obj_and_place",
)

SPLITS: tuple[str, ...] = ("train", "seen", "unseen")

#: receptacle type -> openable (must be opened before use, like in ALFWorld)
RECEPTACLES: Mapping[str, bool] = {
    "ArmChair": False,
    "BathtubBasin": False,
    "Bed": False,
    "Cabinet": True,
    "CoffeeMachine": False,
    "CoffeeTable": False,
    "CounterTop": False,
    "Desk": False,
    "DiningTable": False,
    "Drawer": True,
    "Dresser": False,
    "Fridge": True,
    "GarbageCan": False,
    "HandTowelHolder": False,
    "LaundryHamper": False,
    "Microwave": True,
    "Ottoman": False,
    "Safe": True,
    "Shelf": False,
    "SideTable": False,
    "SinkBasin": False,
    "Sofa": False,
    "StoveBurner": False,
    "TVStand": False,
    "Toaster": False,
    "Toilet": False,
    "ToiletPaperHanger": False,
}

#: the appliance each state-changing task type needs (ALFWorld's PDDL domain fixes them)
APPLIANCE: Mapping[str, str] = {
    "pick_clean_then_place_in_recep": "SinkBasin",
    "pick_heat_then_place_in_recep": "Microwave",
    "pick_cool_then_place_in_recep": "Fridge",
}

#: the object property each state-changing task type needs
PROPERTY: Mapping[str, str] = {
    "pick_clean_then_place_in_recep": "cleanable",
    "pick_heat_then_place_in_recep": "heatable",
    "pick_cool_then_place_in_recep": "coolable",
}


#: room kinds, with the one-letter codes the object table below uses
ROOMS: Mapping[str, str] = {"K": "kitchen", "T": "bathroom", "B": "bedroom", "L": "living room"}


@dataclass(frozen=True)
class ObjectType:
    """A kind of object: the rooms it belongs to, where it may lie (and be put), and
    what can be done to it."""

    name: str
    rooms: frozenset[str]
    places: frozenset[str]
    cleanable: bool = False
    heatable: bool = False
    coolable: bool = False

    def has(self, prop: str) -> bool:
        return bool(getattr(self, prop))


def _obj(name: str, rooms: str, places: str, props: str = "") -> ObjectType:
    flags = set(props.split())
    return ObjectType(name, frozenset(ROOMS[c] for c in rooms), frozenset(places.split()),
                      cleanable="clean" in flags, heatable="heat" in flags,
                      coolable="cool" in flags)


_KITCHEN_FOOD = "CounterTop DiningTable Fridge GarbageCan SinkBasin Microwave"
_KITCHEN_WARE = "Cabinet CounterTop DiningTable Shelf SinkBasin Microwave Fridge"
_UTENSIL = "Drawer CounterTop DiningTable SinkBasin"
_COOKWARE = "StoveBurner Cabinet CounterTop DiningTable Fridge SinkBasin"
_SMALL_THING = "Desk Drawer Shelf SideTable Dresser"
_SEAT_THING = "Sofa ArmChair CoffeeTable SideTable Dresser Drawer"
_BATH_THING = "Toilet Cabinet CounterTop Shelf GarbageCan Drawer"

#: movable object types of ``train`` and ``seen``
SEEN_OBJECTS: tuple[ObjectType, ...] = (
    _obj("Apple", "K", _KITCHEN_FOOD + " SideTable", "clean heat cool"),
    _obj("Egg", "K", _KITCHEN_FOOD, "clean heat cool"),
    _obj("Potato", "K", _KITCHEN_FOOD, "clean heat cool"),
    _obj("Bread", "K", "CounterTop DiningTable Fridge GarbageCan Microwave", "heat cool"),
    _obj("Mug", "KB", _KITCHEN_WARE + " CoffeeMachine Desk SideTable", "clean heat cool"),
    _obj("Pan", "K", _COOKWARE, "clean cool"),
    _obj("Fork", "K", _UTENSIL, "clean"),
    _obj("Spatula", "K", _UTENSIL, "clean"),
    _obj("Book", "BL", "Bed Desk Shelf Sofa ArmChair CoffeeTable SideTable Dresser Drawer"),
    _obj("CellPhone", "BL", "Bed Desk Sofa ArmChair SideTable Dresser Drawer Safe CoffeeTable"),
    _obj("KeyChain", "BL", _SEAT_THING + " Safe Shelf"),
    _obj("Pencil", "BL", _SMALL_THING + " GarbageCan"),
    _obj("AlarmClock", "B", "Desk Dresser Shelf SideTable"),
    _obj("RemoteControl", "L", _SEAT_THING + " TVStand"),
    _obj("Pillow", "BL", "Bed Sofa ArmChair Ottoman"),
    _obj("Vase", "LB", "Shelf CoffeeTable SideTable Dresser Cabinet Safe TVStand"),
    _obj("SoapBar", "T", "Toilet BathtubBasin SinkBasin CounterTop Cabinet GarbageCan Shelf",
         "clean"),
    _obj("Cloth", "TB", "BathtubBasin SinkBasin CounterTop Cabinet Drawer LaundryHamper GarbageCan",
         "clean"),
    _obj("ToiletPaper", "T", "Toilet ToiletPaperHanger Cabinet CounterTop Shelf Drawer GarbageCan"),
    _obj("SprayBottle", "TK", _BATH_THING),
)

#: movable object types of ``unseen`` (none of them appears in ``train`` or ``seen``)
UNSEEN_OBJECTS: tuple[ObjectType, ...] = (
    _obj("Tomato", "K", _KITCHEN_FOOD, "clean heat cool"),
    _obj("Lettuce", "K", "CounterTop DiningTable Fridge GarbageCan SinkBasin", "clean cool"),
    _obj("Cup", "KB", _KITCHEN_WARE + " Desk", "clean heat cool"),
    _obj("Plate", "K", _KITCHEN_WARE, "clean heat cool"),
    _obj("Bowl", "KL", _KITCHEN_WARE + " Desk", "clean cool"),
    _obj("Spoon", "K", _UTENSIL, "clean"),
    _obj("Ladle", "K", _UTENSIL + " Cabinet", "clean"),
    _obj("Pot", "K", _COOKWARE, "clean cool"),
    _obj("Laptop", "BL", "Bed Desk Sofa ArmChair CoffeeTable SideTable Dresser"),
    _obj("CD", "BL", _SMALL_THING + " Safe GarbageCan"),
    _obj("Pen", "BL", _SMALL_THING + " GarbageCan"),
    _obj("Watch", "BL", _SMALL_THING + " Safe CoffeeTable"),
    _obj("Newspaper", "L", _SEAT_THING + " GarbageCan Shelf Ottoman"),
    _obj("Statue", "LB", "Shelf CoffeeTable SideTable Dresser Desk Safe TVStand"),
    _obj("BasketBall", "BL", "Bed Sofa ArmChair Desk Ottoman"),
    _obj("CreditCard", "BL", _SEAT_THING + " Desk Safe Shelf"),
    _obj("DishSponge", "TK", "SinkBasin BathtubBasin CounterTop Cabinet Drawer Toilet GarbageCan",
         "clean"),
    _obj("HandTowel", "T", "HandTowelHolder CounterTop Cabinet Shelf LaundryHamper GarbageCan"),
    _obj("SoapBottle", "TK", _BATH_THING),
    _obj("Candle", "TL", _BATH_THING + " SideTable Dresser"),
)

#: lamp fixtures (toggleable, not movable) and where they stand; shared by every split
LAMPS: Mapping[str, frozenset[str]] = {
    "DeskLamp": frozenset({"Desk", "SideTable", "Dresser"}),
    "FloorLamp": frozenset({"SideTable", "ArmChair", "Sofa"}),
}

OBJECTS: Mapping[str, ObjectType] = {o.name: o for o in SEEN_OBJECTS + UNSEEN_OBJECTS}


@dataclass(frozen=True)
class Layout:
    """A room layout: its kind and, per receptacle type, how many instances (min, max)."""

    name: str
    room: str
    receptacles: Mapping[str, tuple[int, int]]

    def supports(self, task_type: str) -> bool:
        """The layout has the appliance (or lamp stand) the task type needs."""
        if task_type in APPLIANCE:
            return APPLIANCE[task_type] in self.receptacles
        if task_type == "look_at_obj_in_light":
            return any(set(stands) & set(self.receptacles) for stands in LAMPS.values())
        return True


def _layout(name: str, room: str, spec: str) -> Layout:
    recs: dict[str, tuple[int, int]] = {}
    for item in spec.split():
        rtype, _, counts = item.partition(":")
        lo, _, hi = counts.partition("-")
        recs[rtype] = (int(lo or 1), int(hi or lo or 1))
    return Layout(name, room, recs)


#: layouts of ``train`` and ``seen``
SEEN_LAYOUTS: tuple[Layout, ...] = (
    _layout("kitchen-1", "kitchen",
            "Cabinet:6-10 Drawer:3-5 CounterTop:1-2 Fridge Microwave SinkBasin StoveBurner:4 "
            "CoffeeMachine GarbageCan DiningTable"),
    _layout("kitchen-2", "kitchen",
            "Cabinet:7-10 Drawer:2-4 CounterTop:2-3 Fridge Microwave SinkBasin StoveBurner:2-4 "
            "Toaster GarbageCan Shelf:1-3"),
    _layout("kitchen-3", "kitchen",
            "Cabinet:4-6 Drawer:4-8 CounterTop Fridge Microwave SinkBasin StoveBurner:4 "
            "DiningTable:1-2 CoffeeMachine Toaster GarbageCan"),
    _layout("bathroom-1", "bathroom",
            "Toilet SinkBasin:1-2 BathtubBasin CounterTop Cabinet:2-4 Drawer:1-3 GarbageCan "
            "ToiletPaperHanger HandTowelHolder"),
    _layout("bathroom-2", "bathroom",
            "Toilet SinkBasin Shelf:2-3 Cabinet:1-2 GarbageCan ToiletPaperHanger LaundryHamper"),
    _layout("bedroom-1", "bedroom",
            "Bed Desk Drawer:3-6 SideTable:1-2 Shelf:2-4 GarbageCan LaundryHamper"),
    _layout("bedroom-2", "bedroom", "Bed Dresser Drawer:4-8 SideTable:2 Safe GarbageCan ArmChair"),
    _layout("livingroom-1", "living room",
            "Sofa ArmChair:1-2 CoffeeTable SideTable:1-3 TVStand Drawer:2-4 GarbageCan"),
    _layout("livingroom-2", "living room",
            "Sofa CoffeeTable Shelf:3-6 Cabinet:2-4 Dresser GarbageCan Ottoman"),
)

#: layouts of ``unseen`` only
UNSEEN_LAYOUTS: tuple[Layout, ...] = (
    _layout("kitchen-4", "kitchen",
            "Cabinet:8-11 Drawer:3-5 CounterTop:2-3 Fridge Microwave SinkBasin StoveBurner:4 "
            "CoffeeMachine GarbageCan DiningTable Shelf:1-2"),
    _layout("kitchen-5", "kitchen",
            "Cabinet:3-5 Drawer:1-2 CounterTop Fridge Microwave SinkBasin StoveBurner:2 "
            "DiningTable GarbageCan"),
    _layout("bathroom-3", "bathroom",
            "Toilet SinkBasin:2 BathtubBasin Cabinet:3-5 CounterTop Shelf:1-2 GarbageCan "
            "HandTowelHolder:1-2 ToiletPaperHanger"),
    _layout("bedroom-3", "bedroom",
            "Bed Desk Dresser Drawer:2-3 SideTable Shelf:1-2 Safe GarbageCan ArmChair"),
    _layout("livingroom-3", "living room",
            "Sofa:1-2 ArmChair:2 CoffeeTable SideTable:2 Shelf:2 TVStand Cabinet:1-2 Drawer:1-2 "
            "GarbageCan"),
)

LAYOUTS: Mapping[str, Layout] = {lay.name: lay for lay in SEEN_LAYOUTS + UNSEEN_LAYOUTS}


def layouts_for(split: str) -> tuple[Layout, ...]:
    """The layouts a split draws from (``train`` and ``seen`` share theirs)."""
    return UNSEEN_LAYOUTS if split == "unseen" else SEEN_LAYOUTS


def objects_for(split: str) -> tuple[ObjectType, ...]:
    """The movable object types a split draws from (``train`` and ``seen`` share theirs)."""
    return UNSEEN_OBJECTS if split == "unseen" else SEEN_OBJECTS
